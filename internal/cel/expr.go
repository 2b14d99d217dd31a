package cel

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// AnnotationKey is the annotation the policy records the submitter in.
const AnnotationKey = userinfo.AnnotationKey

// Messages, as the policy module words them (policy/decide.go).
const (
	msgChangeNotAllowed = "user info annotation change is not allowed"
	msgMissing          = "annotation " + AnnotationKey + " is missing: it must record the submitter " +
		"(the mutating policy adds it; a mutating webhook that ran after it may have removed it)"
	msgRemoved = "annotation " + AnnotationKey + " was removed: its previous value must be kept " +
		"(the mutating policy restores it; a mutating webhook that ran after it may have removed it)"
	msgCannotRecord = "the submitter's identity cannot be recorded exactly by the in-apiserver (CEL) policy: "
	msgNotCanonical = "annotation " + AnnotationKey + " is invalid: the in-apiserver (CEL) policy accepts a supplied value only " +
		"in the form encoding/json writes: {\"user\":\"...\",\"groups\":[\"...\"]}, compact, \"user\" first and not empty"
)

// Bounds on the identity the CEL encoding handles: past them the cost of
// escaping every character could pass the API server's budget for one
// expression (1,000,000), so the identity is refused, never recorded
// differently. TestCost measures the worst case against the budget.
const (
	MaxIdentityChars = 24576 // characters of the username and the recorded groups together
	MaxGroups        = 1024  // recorded groups
)

// Quote writes s as a CEL string literal: double-quoted, with \\ and \"
// escaped and every character that is not printable written as \u or \U.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80 && unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		case r >= 0x80 && unicode.IsPrint(r) && r != 0xFFFD:
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonEscapes are the characters encoding/json escapes in a valid UTF-8
// string (HTML escaping on, its default), with their escapes.
var jsonEscapes = func() [][2]string {
	out := [][2]string{{`\`, `\\`}, {`"`, `\"`}, {"\b", `\b`}, {"\f", `\f`}, {"\n", `\n`}, {"\r", `\r`}, {"\t", `\t`}}
	for c := 0; c < 0x20; c++ {
		switch c {
		case '\b', '\f', '\n', '\r', '\t':
			continue
		}
		out = append(out, [2]string{string(rune(c)), fmt.Sprintf(`\u%04x`, c)})
	}
	return append(out, [2]string{"<", `\u003c`}, [2]string{">", `\u003e`}, [2]string{"&", `\u0026`},
		[2]string{"\u2028", `\u2028`}, [2]string{"\u2029", `\u2029`})
}()

// needsEscape matches a string that has a character jsonEscapes replaces.
const needsEscape = `[\x00-\x1f"\\<>&\x{2028}\x{2029}]`

// escapeJSON is the CEL expression of the JSON string body of x (a CEL
// expression of type string): unchanged when nothing needs escaping, so
// the common case costs one scan; otherwise split into characters, each
// looked up in variables.escapes, and joined. The cost is linear in the
// length (a chain of replace calls would cost the length times the number
// of escapes).
func escapeJSON(x string) string {
	return "(" + x + ".matches(" + Quote(needsEscape) + ") ? " + x +
		".split('').map(c, c in variables.escapes ? variables.escapes[c] : c).join('') : " + x + ")"
}

// escapesMap is the CEL map literal of jsonEscapes.
func escapesMap() string {
	parts := make([]string, len(jsonEscapes))
	for i, e := range jsonEscapes {
		parts[i] = Quote(e[0]) + ": " + Quote(e[1])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// jsonStringRE matches the body of a JSON string exactly as encoding/json
// writes it: characters it writes raw, and the escapes it writes.
const jsonStringRE = `(?:[^"\\\x00-\x1f<>&\x{2028}\x{2029}]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]|26|3c|3e)|\\u202[89])`

// canonicalValue matches a user.info value as encoding/json writes
// {"user":..,"groups":[..]}: a non-empty user, then optionally groups.
const canonicalValue = `^\{"user":"` + jsonStringRE + `+"(?:,"groups":\[(?:"` + jsonStringRE + `*"(?:,"` + jsonStringRE + `*")*)?\])?\}$`

// invalidUTF8 is the CEL expression of whether x holds bytes that are not
// UTF-8. Go's regexp, which CEL's matches() is, reads each such byte as
// U+FFFD; a real U+FFFD is replaced by an ASCII byte first, so what still
// matches is an invalid byte (replacing with ASCII cannot join bytes into a
// valid sequence).
func invalidUTF8(x string) string {
	return x + `.replace("\ufffd", "_").matches("\ufffd")`
}

// anyMatch is the CEL expression of whether any of patterns matches x
// (an unanchored search, as the policy's matchAny); false for none.
func anyMatch(x string, patterns []string) string {
	if len(patterns) == 0 {
		return "false"
	}
	parts := make([]string, len(patterns))
	for i, p := range patterns {
		parts[i] = x + ".matches(" + Quote(p) + ")"
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// keepExpr is the CEL expression of whether group g is recorded
// (recordedGroups).
func keepExpr(g string, s *GroupShaping) string {
	if s == nil {
		return "true"
	}
	if s.Omit {
		return "false"
	}
	cond := []string{}
	if len(s.Include) > 0 {
		cond = append(cond, anyMatch(g, s.Include))
	}
	if len(s.Exclude) > 0 {
		cond = append(cond, "!"+anyMatch(g, s.Exclude))
	}
	if len(cond) == 0 {
		return "true"
	}
	return strings.Join(cond, " && ")
}

// variable is a named CEL expression of a policy.
type variable struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

// identityVariables are the variables both policies share: the
// submitter, the groups recorded, whether the identity can be encoded
// exactly, and the annotation value the policy records for it.
func identityVariables(s *Settings) []variable {
	keep := keepExpr("g", s.RecordedGroups)
	kept := "variables.groups.filter(g, " + keep + ")"
	switch keep {
	case "true":
		kept = "variables.groups"
	case "false":
		kept = "variables.groups.filter(g, false)"
	}
	trusted := anyMatch("variables.user", s.ExternalUsers)
	if s.TrustControllers && len(s.SystemUsers) > 0 {
		trusted = anyMatch("variables.user", s.SystemUsers) + " || " + trusted
	}
	allowedGroups := anyMatch("g", s.ExternalGroups)
	if s.params {
		kept = "variables.groups.filter(g, " + paramKeep("g") + ")"
		trusted = "(" + paramTrue("trustControllers", true) + " && " + paramMatch("variables.user", "systemUsers") + ") || " +
			paramMatch("variables.user", "externalUsers")
		allowedGroups = paramMatch("g", "externalGroups")
	}
	return []variable{
		{"user", "has(request.userInfo.username) ? request.userInfo.username : ''"},
		{"groups", "has(request.userInfo.groups) ? request.userInfo.groups : []"},
		{"escapes", escapesMap()},
		{"kept", kept},
		{"invalidUTF8", invalidUTF8("variables.user") + " || variables.kept.exists(g, " + invalidUTF8("g") + ")"},
		{"tooLarge", fmt.Sprintf("size(variables.kept) > %d || size(variables.user) + variables.kept.map(g, size(g)).sum() > %d",
			MaxGroups, MaxIdentityChars)},
		{"encodable", "!variables.invalidUTF8 && !variables.tooLarge"},
		{"own", "!variables.encodable ? '' : '{' + " +
			"(variables.user != '' ? '\"user\":\"' + " + escapeJSON("variables.user") + " + '\"' : '') + " +
			"(size(variables.kept) > 0 ? (variables.user != '' ? ',' : '') + '\"groups\":[' + " +
			"variables.kept.map(g, '\"' + " + escapeJSON("g") + " + '\"').join(',') + ']' : '') + '}'"},
		{"allowed", trusted + " || variables.groups.exists(g, " + allowedGroups + ")"},
		{"cannotRecord", Quote(msgCannotRecord) + " + (variables.invalidUTF8 ? " +
			Quote("the username or a recorded group is not valid UTF-8 (encoding/json would write U+FFFD in its place)") + " : " +
			Quote(fmt.Sprintf("it is larger than the policy encodes within the API server's CEL cost limits (at most %d recorded groups, and at most %d characters in the username and the recorded groups together): such identities need the webhook", MaxGroups, MaxIdentityChars)) + ")"},
		{"notAllowed", "'user ' + variables.user + ' with groups [' + variables.groups.join(',') + '] is not allowed to set user annotation'"},
	}
}
