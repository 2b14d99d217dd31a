package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// AnnotationKey is where YuniKorn reads the submitting user and groups.
const AnnotationKey = "yunikorn.apache.org/user.info"

// identity is the submitter as the API server authenticated it.
type identity struct {
	user string
	// groups is the text of the JSON array request.userInfo.groups, checked
	// to hold only strings ("" when absent), and ngroups its length. The
	// array is kept as text rather than as a []string on purpose: each
	// string would be a pointer into the middle of the payload, and
	// TinyGo's collector walks back from such a pointer to the start of
	// the allocation, so a request with tens of thousands of groups made
	// every collection quadratic (seconds per request).
	groups  string
	ngroups int
}

// eachGroup calls f with each group, decoded as encoding/json decodes it,
// until f returns false.
func (id identity) eachGroup(f func(string) bool) {
	if id.ngroups == 0 {
		return
	}
	gjson.Parse(id.groups).ForEach(func(_, g gjson.Result) bool { return f(str(g)) })
}

// appendGroups appends the groups to b, comma-separated, each written by
// write.
func (id identity) appendGroups(b []byte, write func([]byte, string) []byte) []byte {
	first := true
	id.eachGroup(func(g string) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = write(b, g)
		return true
	})
	return b
}

// parseIdentity reads request.userInfo. A missing or null userInfo, a
// username that is not a string or groups that are not an array of strings
// are malformed: the API server always sends them well-formed, so anything
// else did not come from it.
func parseIdentity(ui gjson.Result) (identity, error) {
	var id identity
	if !present(ui) {
		return id, malformed("request.userInfo", "missing")
	}
	if !isObject(ui) {
		return id, malformed("request.userInfo", "must be an object, got "+typeName(ui))
	}
	name, err := member(ui, "request.userInfo", "username")
	if err != nil {
		return id, err
	}
	if name.Exists() {
		if name.Type != gjson.String {
			return id, malformed("request.userInfo.username", "must be a string, got "+typeName(name))
		}
		id.user = str(name)
	}
	groups, err := member(ui, "request.userInfo", "groups")
	if err != nil {
		return id, err
	}
	if groups.Exists() {
		if !groups.IsArray() {
			return id, malformed("request.userInfo.groups", "must be an array of strings, got "+typeName(groups))
		}
		groups.ForEach(func(_, g gjson.Result) bool {
			if g.Type != gjson.String {
				err = malformed("request.userInfo.groups["+strconv.Itoa(id.ngroups)+"]", "must be a string, got "+typeName(g))
				return false
			}
			id.ngroups++
			return true
		})
		if err != nil {
			return id, err
		}
		id.groups = groups.Raw
	}
	return id, nil
}

// annotationValue is the user.info value this policy writes for id: compact
// JSON, "user" then "groups", groups as sent (order and duplicates kept),
// empty user or empty group list omitted, escaped as encoding/json does.
// It is byte-for-byte what YuniKorn's own admission controller writes.
func (id identity) annotationValue() string { return id.recordedValue(nil) }

// recordedValue is annotationValue with the groups shaped by g
// (recordedGroups): only groups of request.userInfo, in their order, those
// g keeps. When none is kept, "groups" is left out, as for a submitter
// without groups, and YuniKorn resolves the user's groups itself.
func (id identity) recordedValue(g *groupShaping) string {
	b := make([]byte, 0, 24+len(id.user)+len(id.groups)+id.ngroups)
	b = append(b, '{')
	if id.user != "" {
		b = append(b, `"user":`...)
		b = appendJSONString(b, id.user)
	}
	kept := 0
	id.eachGroup(func(group string) bool {
		if !g.keeps(group) {
			return true
		}
		switch {
		case kept > 0:
			b = append(b, ',')
		case id.user != "":
			b = append(b, `,"groups":[`...)
		default:
			b = append(b, `"groups":[`...)
		}
		kept++
		b = appendJSONString(b, group)
		return true
	})
	if kept > 0 {
		b = append(b, ']')
	}
	b = append(b, '}')
	// b is not touched again: the string shares its bytes rather than
	// copying a value that can be as large as the request.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// notAllowedMessage is YuniKorn's denial text for a submitter who may not
// supply the annotation, kept identical so existing alerts still match.
func (id identity) notAllowedMessage() string {
	b := []byte("user " + id.user + " with groups [")
	b = id.appendGroups(b, func(b []byte, g string) []byte { return append(b, g...) })
	return string(append(b, "] is not allowed to set user annotation"...))
}

// checkSuppliedValue validates a user.info value that an allowed submitter
// wrote. It is stricter than YuniKorn's json.Unmarshal on purpose: the shim
// decodes with Go's case-insensitive field matching, where unknown keys are
// ignored and the last duplicate wins, so {"user":"a","USER":"root"} would
// be read as root. Only an object with exactly the keys "user" (a non-empty
// string) and optionally "groups" (an array of strings) is accepted. The
// returned message names the offending key as written.
func checkSuppliedValue(value string) string {
	if !utf8.ValidString(value) {
		// Go's decoder would read invalid bytes as U+FFFD, so several
		// distinct values would name the same user in YuniKorn.
		return "value is not valid UTF-8"
	}
	if _, deep := tooDeep(value, maxValueDepth); deep {
		return "value nests deeper than " + strconv.Itoa(maxValueDepth) + " levels (a user.info value is an object with a list of groups)"
	}
	if !gjson.Valid(value) {
		return "value is not valid JSON"
	}
	v := gjson.Parse(value)
	if !isObject(v) {
		return "value must be a JSON object like {\"user\":\"alice\",\"groups\":[\"dev\"]}, got " + typeName(v)
	}
	var problem string
	var user, groups gjson.Result
	v.ForEach(func(k, val gjson.Result) bool {
		key := str(k)
		switch key {
		case "user":
			if user.Exists() {
				problem = "duplicate key \"user\""
				return false
			}
			user = val
		case "groups":
			if groups.Exists() {
				problem = "duplicate key \"groups\""
				return false
			}
			groups = val
		default:
			if canonical := foldedKey(key); canonical != "" {
				problem = "key " + quote(key) + " must be written in lower case: keys are case-sensitive here, but YuniKorn would read it as " + quote(canonical)
			} else {
				problem = "unknown key " + quote(key) + " (only \"user\" and \"groups\" are allowed)"
			}
			return false
		}
		return true
	})
	if problem != "" {
		return problem
	}
	switch {
	case !user.Exists():
		return "key \"user\" is required"
	case user.Type != gjson.String:
		return "\"user\" must be a string, got " + typeName(user)
	case str(user) == "":
		return "\"user\" must not be empty"
	}
	if groups.Exists() {
		if !groups.IsArray() {
			return "\"groups\" must be an array of strings, got " + typeName(groups)
		}
		i := 0
		groups.ForEach(func(_, g gjson.Result) bool {
			if g.Type != gjson.String {
				problem = "\"groups\"[" + strconv.Itoa(i) + "] must be a string, got " + typeName(g)
				return false
			}
			i++
			return true
		})
	}
	return problem
}

// foldedKey returns the key that Go's encoding/json (and so YuniKorn's shim)
// would match key to, "" if none. Its matching is Unicode case folding, so
// "USER" and even "uſer" (with U+017F) both mean "user" there.
func foldedKey(key string) string {
	switch {
	case strings.EqualFold(key, "user"):
		return "user"
	case strings.EqualFold(key, "groups"):
		return "groups"
	}
	return ""
}
