// Package nsfilter is the namespace rule of the scheduling setting, shared
// by the policy (which sends the Pods of a processed namespace to
// YuniKorn) and the host's audit (which audits what the policy would send):
// which namespaces are processed, as YuniKorn's admission controller
// decides it (k8shim pkg/admission: the processNamespaces and
// bypassNamespaces filters, and the namespace's enableYuniKorn annotation,
// which overrides them), and how a comma-separated list of patterns is
// split. It is pure (no I/O) and TinyGo-friendly.
package nsfilter

import (
	"regexp"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

// Keys and values the rule reads (k8shim pkg/common/constants).
const (
	// AnnotationEnableYuniKorn on a namespace overrides the lists.
	AnnotationEnableYuniKorn = "yunikorn.apache.org/namespace.enableYuniKorn"
	// LabelApp with the value SchedulerPodLabelValue marks the
	// scheduler's own Pods, which the admission controller leaves alone.
	LabelApp               = "app"
	SchedulerPodLabelValue = "yunikorn"
	// DefaultBypass is admissionController.filtering.bypassNamespaces.
	DefaultBypass = "^kube-system$"
)

// State is a namespace annotation as YuniKorn's namespace cache reads it:
// absent (Unset), "true" (True), or any other value (False).
type State int8

const (
	Unset State = iota
	False
	True
)

// Flag reads an annotation: present says whether it exists, value is its
// string value ("" for a value that is not a string).
func Flag(present bool, value string) State {
	switch {
	case !present:
		return Unset
	case value == "true":
		return True
	}
	return False
}

// Processed reports whether the Pods of namespace ns are processed (sent
// to YuniKorn): the namespace's enableYuniKorn annotation decides when it
// is set; otherwise ns must match a process pattern (an empty list matches
// every namespace) and no bypass pattern.
func Processed(process, bypass []*regexp.Regexp, enable State, ns string) bool {
	switch enable {
	case True:
		return true
	case False:
		return false
	}
	return (len(process) == 0 || MatchAny(process, ns)) && !MatchAny(bypass, ns)
}

// IsSchedulerPod reports whether a Pod whose app label is appLabel is one
// of the scheduler's own, which the admission controller leaves alone.
func IsSchedulerPod(appLabel string) bool { return appLabel == SchedulerPodLabelValue }

// MatchAny reports whether any pattern matches s. Matching is an
// unanchored search, as YuniKorn's regexp.MatchString: anchors are the
// operator's job.
func MatchAny(patterns []*regexp.Regexp, s string) bool {
	for _, re := range patterns {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// SplitPatterns splits a comma-separated list of regular expressions at
// the commas that separate patterns: not at an escaped comma, nor inside
// a character class, a repetition like {1,8}, or parentheses, where the
// comma belongs to the pattern. A list whose brackets do not balance is an
// error rather than a guess: problem says why, pieces is nil.
func SplitPatterns(list string) (pieces []string, problem string) {
	start, paren, brace := 0, 0, 0
	inClass := false
	for i := 0; i < len(list); i++ {
		switch c := list[i]; {
		case c == '\\':
			i++ // the escaped character is literal
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			// A ] right after [ or [^ is a literal member of the class.
			if i+1 < len(list) && list[i+1] == '^' {
				i++
			}
			if i+1 < len(list) && list[i+1] == ']' {
				i++
			}
		case c == '(':
			paren++
		case c == ')':
			paren--
		case c == '{':
			brace++
		case c == '}':
			if brace > 0 {
				brace--
			}
		case c == ',' && paren == 0 && brace == 0:
			pieces = append(pieces, list[start:i])
			start = i + 1
		}
	}
	if inClass || paren != 0 || brace != 0 {
		return nil, "cannot split " + jsontext.Quote(list) + " into patterns: a bracket, brace or parenthesis is not closed (write the list as an array of strings to be explicit)"
	}
	return append(pieces, list[start:]), ""
}
