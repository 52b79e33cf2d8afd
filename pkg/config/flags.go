package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Flag is one setting of a configuration struct T, defined once: its flag,
// the help text and the field of T the flag binds. The default is that
// field's value when the flags are added, and its name in a configuration
// file is the field's JSON name, so neither is repeated here, and the flag
// an error names (FlagNames) is derived from the field the error is about.
type Flag[T any] struct {
	Name  string
	Usage string
	Field func(c *T) any
}

// AddFlags binds each of flags to its field of c, in order; the current
// values of c are the defaults --help shows. A field of a type it cannot
// bind is a programming error, found by any test that adds the flags.
func AddFlags[T any](fs *pflag.FlagSet, c *T, flags []Flag[T]) {
	for _, f := range flags {
		switch p := f.Field(c).(type) {
		case *string:
			fs.StringVar(p, f.Name, *p, f.Usage)
		case *int:
			fs.IntVar(p, f.Name, *p, f.Usage)
		case *float64:
			fs.Float64Var(p, f.Name, *p, f.Usage)
		case *bool:
			fs.BoolVar(p, f.Name, *p, f.Usage)
		case *[]string:
			fs.StringSliceVar(p, f.Name, *p, f.Usage)
		case *metav1.Duration:
			fs.DurationVar(&p.Duration, f.Name, p.Duration, f.Usage)
		case *v1alpha1.ValidationAction:
			fs.Var(enumFlag[v1alpha1.ValidationAction]{p, "action"}, f.Name, f.Usage)
		case *admissionregistrationv1.FailurePolicyType:
			fs.Var(enumFlag[admissionregistrationv1.FailurePolicyType]{p, "policy"}, f.Name, f.Usage)
		case *spread.MessageDetail:
			fs.Var(enumFlag[spread.MessageDetail]{p, "detail"}, f.Name, f.Usage)
		case *Toggle:
			fs.Var(enumFlag[Toggle]{p, "auto|true|false"}, f.Name, f.Usage)
		default:
			panic(fmt.Sprintf("option --%s binds a %T, which AddFlags cannot bind", f.Name, p))
		}
	}
}

// FlagNames maps the JSON name of each field flags bind (its name in a
// configuration file, and in the field paths of Validate's errors) to its
// flag, "--name". Fields of embedded structs are found at the top level, as
// the JSON of an inlined struct has them. A flag-only field (json:"-") has
// no entry.
func FlagNames[T any](flags []Flag[T]) map[string]string {
	out := map[string]string{}
	c := new(T)
	for _, f := range flags {
		p := reflect.ValueOf(f.Field(c))
		name, found := jsonName(reflect.ValueOf(c).Elem(), p)
		if !found {
			panic(fmt.Sprintf("option --%s binds a %s that is no field of %T", f.Name, p.Type().Elem(), c))
		}
		if name != "" {
			out[name] = "--" + f.Name
		}
	}
	return out
}

// jsonName returns the JSON name of the field of struct v that p points at,
// looking into embedded structs; "" for a flag-only field (json:"-").
func jsonName(v reflect.Value, p reflect.Value) (name string, found bool) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		// The type check tells a field from the embedded struct that starts
		// at the same address.
		if f.Addr().Pointer() == p.Pointer() && f.Type() == p.Type().Elem() {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" {
				return "", true
			}
			return name, true
		}
		start := f.Addr().Pointer()
		if sf.Anonymous && f.Kind() == reflect.Struct && p.Pointer() >= start && p.Pointer() < start+f.Type().Size() {
			return jsonName(f, p)
		}
	}
	return "", false
}

// FlagOf returns the flag (--name) of the field e is about, "" when no
// flag binds it; flags is FlagNames' map.
func FlagOf(e *field.Error, flags map[string]string) string {
	top, _, _ := strings.Cut(e.Field, "[")
	top, _, _ = strings.Cut(top, ".")
	return flags[top]
}

// FormatError renders one validation error as the flag it is about, its
// field path and what is wrong: "--port (port): Invalid value: 0: must be
// between 1 and 65535". flags is FlagNames' map.
func FormatError(e *field.Error, flags map[string]string) string {
	if flag := FlagOf(e, flags); flag != "" {
		return fmt.Sprintf("%s (%s): %s", flag, e.Field, e.ErrorBody())
	}
	return fmt.Sprintf("%s: %s", e.Field, e.ErrorBody())
}

// enumFlag lets a flag bind straight to a field of a string type (an
// action, a failure policy, a message detail, a toggle); Validate checks
// the value.
type enumFlag[T ~string] struct {
	p   *T
	typ string
}

func (f enumFlag[T]) String() string {
	if f.p == nil {
		return ""
	}
	return string(*f.p)
}
func (f enumFlag[T]) Set(s string) error { *f.p = T(s); return nil }
func (f enumFlag[T]) Type() string       { return f.typ }
