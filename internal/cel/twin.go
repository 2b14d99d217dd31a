package cel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// TwinConditionName names the match condition TwinCondition writes.
const TwinConditionName = "needs-the-twin"

// The placeholders of TwinConditionTemplate: the allow-list patterns, each
// written with TwinUserMatch or TwinGroupMatch and joined by " || " in
// parentheses, or "false" for none. The chart fills them from its values
// (Helm's toJson writes a pattern as JSONString does), so that Go and the
// chart write one text.
const (
	TwinUsersPlaceholder  = "@ALLOWED_USERS@"
	TwinGroupsPlaceholder = "@ALLOWED_GROUPS@"
	// TwinGroupMatch is the fmt format of one group pattern, given its
	// JSONString.
	TwinGroupMatch = "g.matches(%s)"
)

// TwinUserMatch is the fmt format of one user pattern, given its
// JSONString: the submitter as the identity variables read it.
func TwinUserMatch() string {
	for _, v := range identityVariables(&Settings{}) {
		if v.Name == "user" {
			return "(" + v.Expression + ").matches(%s)"
		}
	}
	panic("cel: no user variable")
}

// maxTwinValue bounds the annotation the condition matches against the
// canonical form: past it the twin judges. Matching a value costs in
// proportion to its length, and a match condition over the API server's
// cost limit fails the request; test/cel finds the limit past 64 KiB and
// checks a value at this bound. Records are far shorter in practice.
const maxTwinValue = 32 << 10

// TwinCondition is the match condition of the validating twin's webhook
// for Pods and workloads (docs/BEHAVIOUR.md §4.9) under settings s (a
// settings object ParseSettings accepted, recordedGroups unset): true,
// so that the API server calls the twin, unless the request creates a Pod
// whose final annotation is either
//
//   - byte for byte the record the policy writes for its own submitter
//     (with every group), whoever the submitter is, or
//   - a value in the form encoding/json writes, supplied by a submitter
//     the allow-lists trust (trustControllers with systemUsers,
//     externalUsers, externalGroups): a controller's Pod that carries its
//     template's record.
//
// The twin admits both (the ValidatingAdmissionPolicy's supplied-value
// checks, which the module agrees with on every fixture, and test/cel
// checks the condition itself against the module). So the API server
// judges the commonest final objects itself and skips a second webhook
// call; the twin still judges every other value, every UPDATE, every
// other kind.
//
// The condition is the shared identity variables (identityVariables)
// with each variable written out, since a webhook's match conditions have
// none. It cannot fail: an identity past the cost bounds or not valid
// UTF-8 makes the record empty and skips the allow-lists before anything
// costly, an empty or over-long value never skips, and the patterns are
// ones the policy compiled.
func TwinCondition(s *Settings) string {
	var users, groups []string
	if s.TrustControllers {
		users = append(users, s.SystemUsers...)
	}
	users = append(users, s.ExternalUsers...)
	groups = append(groups, s.ExternalGroups...)
	return FillTwinCondition(TwinConditionTemplate(), users, groups)
}

// FillTwinCondition puts the allow-lists' patterns into template (the
// chart does the same with Helm's functions).
func FillTwinCondition(template string, users, groups []string) string {
	join := func(format string, patterns []string) string {
		if len(patterns) == 0 {
			return "false"
		}
		parts := make([]string, len(patterns))
		for i, p := range patterns {
			parts[i] = strings.Replace(format, "%s", JSONString(p), 1)
		}
		return "(" + strings.Join(parts, " || ") + ")"
	}
	return strings.NewReplacer(TwinUsersPlaceholder, join(TwinUserMatch(), users),
		TwinGroupsPlaceholder, join(TwinGroupMatch, groups)).Replace(template)
}

// JSONString writes s as encoding/json does (HTML characters escaped),
// which is also a CEL string literal of s: Helm's toJson writes the same.
func JSONString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always encodes
	}
	return string(b)
}

// TwinConditionTemplate is TwinCondition with the allow-lists left as
// placeholders.
func TwinConditionTemplate() string {
	vars := map[string]string{}
	for _, v := range identityVariables(&Settings{}) {
		vars[v.Name] = v.Expression
	}
	vars["allowedHere"] = TwinUsersPlaceholder + " || variables.groups.exists(g, " + TwinGroupsPlaceholder + ")"
	ann := "object.metadata.annotations[" + Quote(AnnotationKey) + "]"
	skip := "request.operation == 'CREATE' && request.resource.group == '' && request.resource.resource == 'pods' && request.kind.kind == 'Pod' && " +
		"variables.user != '' && has(object.metadata.annotations) && " + Quote(AnnotationKey) + " in object.metadata.annotations && " +
		ann + " != '' && (" + ann + " == variables.own || (" +
		fmt.Sprintf("size(%s) <= %d && !variables.tooLarge && variables.allowedHere && ", ann, maxTwinValue) +
		ann + ".matches(" + Quote(canonicalValue) + ") && !" + invalidUTF8(ann) + "))"
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
