// Package admission holds spreadguard's controller-runtime admission
// handlers and the HTTP endpoint that serves them.
//
// The handlers decode the object under review, call pkg/engine (the same
// pipeline kubectl-spread runs offline) and turn its decision into an
// answer: a patch, an allow (possibly with warnings), a denial, or an error.
// The three kinds of outcome stay distinct: a pod whose hard constraints
// cannot be met is Denied; a fault inside the webhook is Errored(500), never
// a silent allow; a request that cannot be decoded is a 400.
package admission
