// Package spreadtest holds the fluent builders that spreadguard's tests use
// to write pods, nodes, owners and lookup fakes in one readable line:
//
//	spreadtest.MakePod().Name("p").Namespace("ns").Label("app", "a").Node("n1").Obj()
//	spreadtest.MakeNode().Name("n1").Zone("a").Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule).Obj()
//	spreadtest.Constraint(1, v1.LabelTopologyZone).Selector(sel).MinDomains(3).Obj()
//
// Every builder starts from a fresh object and Obj returns a deep copy, so a
// builder can be reused to stamp out many objects. Only tests import this
// package.
package spreadtest
