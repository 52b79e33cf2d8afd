package spread

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A selector built for every mutated pod is checked against the label
// syntax the API enforces, and apimachinery checks it with regular
// expressions, about 6% of a mutating review's server CPU in its profile at
// 5,000 nodes. These functions accept exactly
// what it accepts (FuzzLabelSyntax holds them equal to
// k8s.io/apimachinery/pkg/api/validate/content.IsLabelKey and
// k8s.io/apimachinery/pkg/util/validation.IsValidLabelValue), so that the
// common, valid selector skips the expressions; anything they refuse still
// goes through apimachinery, which words the error.

// labelKeyValid reports whether k is a valid label key: a name, optionally
// prefixed by a DNS-1123 subdomain and '/'.
func labelKeyValid(k string) bool {
	prefix, name, prefixed := strings.Cut(k, "/")
	if !prefixed {
		return labelName(k)
	}
	return dns1123Subdomain(prefix) && labelName(name)
}

// labelValueValid reports whether v is a valid label value: empty, or a
// name.
func labelValueValid(v string) bool {
	return v == "" || labelName(v)
}

// labelName reports whether s matches ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
// in at most 63 bytes.
func labelName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !alphanumeric(s[0]) || !alphanumeric(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alphanumeric(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// dns1123Subdomain reports whether s is at most 253 bytes of dot-separated
// labels, each matching [a-z0-9]([-a-z0-9]*[a-z0-9])?.
func dns1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || !lowerAlphanumeric(label[0]) || !lowerAlphanumeric(label[len(label)-1]) {
			return false
		}
		for i := 1; i < len(label)-1; i++ {
			if c := label[i]; !lowerAlphanumeric(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func alphanumeric(c byte) bool {
	return lowerAlphanumeric(c) || 'A' <= c && c <= 'Z'
}

func lowerAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}

// labelSelectorValid reports whether metav1.LabelSelectorAsSelector accepts
// sel for certain. False means "ask it": an operator this does not know,
// or a key or value it does not take, is for apimachinery to judge.
func labelSelectorValid(sel *metav1.LabelSelector) bool {
	for k, v := range sel.MatchLabels {
		if !labelKeyValid(k) || !labelValueValid(v) {
			return false
		}
	}
	for _, e := range sel.MatchExpressions {
		if !labelKeyValid(e.Key) {
			return false
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				return false
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				return false
			}
		default:
			return false
		}
		for _, v := range e.Values {
			if !labelValueValid(v) {
				return false
			}
		}
	}
	return true
}
