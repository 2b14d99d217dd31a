package cel

import (
	"fmt"
	"regexp"
)

// TwinConditionName names the match condition TwinCondition writes.
const TwinConditionName = "not-the-submitters-own-record"

// TwinCondition is the match condition of the validating twin's webhook
// for Pods and workloads (docs/BEHAVIOUR.md §4.9): true, so that the
// API server calls the twin, unless the request creates a Pod whose final
// annotation is, byte for byte, the record the policy writes for its own
// submitter with every group. Such a Pod is one the twin admits under
// every setting this package expresses (ParseSettings) with
// recordedGroups unset: the ValidatingAdmissionPolicy admits it (the
// value is the submitter's own, whoever the submitter is), and the
// module agrees with that policy on every fixture (test/cel). So the
// API server checks the commonest final object itself and skips a second
// webhook call; the twin still judges every other object, every UPDATE,
// and every Pod whose annotation a later mutating webhook changed.
//
// The condition is the shared identity variables (identityVariables, the
// encoding the in-apiserver policies record) with each variable written
// out, since a webhook's match conditions have no variables. It cannot
// fail: for a submitter the encoding does not cover (invalid UTF-8, past
// the cost bounds) variables.own is empty before anything costly is
// evaluated, and an empty annotation never skips.
func TwinCondition() string {
	vars := map[string]string{}
	for _, v := range identityVariables(&Settings{}) {
		vars[v.Name] = v.Expression
	}
	skip := "request.operation == 'CREATE' && request.resource.group == '' && request.resource.resource == 'pods' && request.kind.kind == 'Pod' && " +
		"variables.user != '' && has(object.metadata.annotations) && " + Quote(AnnotationKey) + " in object.metadata.annotations && " +
		"object.metadata.annotations[" + Quote(AnnotationKey) + "] != '' && " +
		"object.metadata.annotations[" + Quote(AnnotationKey) + "] == variables.own"
	return "!(" + inline(skip, vars, 0) + ")"
}

var variableRef = regexp.MustCompile(`\bvariables\.([A-Za-z_][A-Za-z0-9_]*)\b`)

// inline replaces each variables.NAME in expr by its expression, in
// parentheses, recursively.
func inline(expr string, vars map[string]string, depth int) string {
	if depth > 8 {
		panic("cel: variables refer to each other too deeply")
	}
	return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := variableRef.FindStringSubmatch(ref)[1]
		e, ok := vars[name]
		if !ok {
			panic(fmt.Sprintf("cel: no variable %q", name))
		}
		return "(" + inline(e, vars, depth+1) + ")"
	})
}
