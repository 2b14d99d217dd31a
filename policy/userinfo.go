package main

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// AnnotationKey is where YuniKorn reads the submitting user and groups
// (the policy's short name for userinfo.AnnotationKey).
const AnnotationKey = userinfo.AnnotationKey

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

// annotationValue is the user.info value this policy writes for id:
// userinfo.AppendValue of the user and groups as sent (order and
// duplicates kept), byte for byte what YuniKorn's own admission controller
// writes.
func (id identity) annotationValue() string { return id.recordedValue(nil) }

// recordedValue is annotationValue with the groups shaped by g
// (recordedGroups): only groups of request.userInfo, in their order, those
// g keeps. When none is kept, "groups" is left out, as for a submitter
// without groups, and YuniKorn resolves the user's groups itself.
func (id identity) recordedValue(g *groupShaping) string {
	b := make([]byte, 0, 24+len(id.user)+len(id.groups)+id.ngroups)
	b = userinfo.AppendValue(b, id.user, func(yield func(string) bool) {
		id.eachGroup(func(group string) bool { return !g.keeps(group) || yield(group) })
	})
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
// wrote (userinfo.Check): "" when it is acceptable, else what is wrong,
// naming the offending key as written.
func checkSuppliedValue(value string) string {
	if err := userinfo.Check(value); err != nil {
		return err.Error()
	}
	return ""
}

// decideLegacyLabel decides an UPDATE of an object that records no
// user.info before or after (docs/BEHAVIOUR.md §4.3): YuniKorn's shim then
// reads the user from the legacy label (userLabelKey), so a label added or
// changed is judged as a supplied user.info naming that user would be. It
// stands if the label names the submitter, or the submitter is trusted to
// name others (bypassAuth, an allowed submitter, an adopter, or trustRBAC's
// grant for that user); anything else is refused. Removing the label
// leaves YuniKorn's default user, which charges no one: it passes.
func decideLegacyLabel(s *Settings, r request, id identity, old, cur *podMeta) (decision, error) {
	before, _, err := old.stringMapEntry("labels", s.UserLabelKey)
	if err != nil {
		return decision{}, err
	}
	after, _, err := cur.stringMapEntry("labels", s.UserLabelKey)
	if err != nil {
		return decision{}, err
	}
	label := str(after)
	switch {
	case label == "" || label == str(before):
		return accept("update: absent before and after"), nil
	case s.BypassAuth:
		return accept("update: legacy label, bypassAuth"), nil
	case label == id.user:
		return accept("update: legacy label, submitter's own user"), nil
	case allowed(s, id):
		return accept("update: legacy label, allowed submitter"), nil
	case s.adopter(id):
		return accept("update: legacy label, adopter"), nil
	case s.TrustRBAC != nil:
		d, err := decideByRBAC(s, r, id, string(userinfo.AppendValue(nil, label, nil)))
		d.rule = "update: legacy label, " + strings.TrimPrefix(d.rule, "create: present, ")
		if !d.accepted {
			d.message = msgChangeNotAllowed + ": " + legacyLabelMessage(s, label) + "; " + d.message
		}
		return d, err
	}
	return reject("update: legacy label, submitter not allowed", codeForbidden,
		msgChangeNotAllowed+": "+legacyLabelMessage(s, label)+"; "+id.notAllowedMessage()), nil
}

// legacyLabelMessage says why a label naming user is judged.
func legacyLabelMessage(s *Settings, user string) string {
	return "the object records no " + AnnotationKey + ", so YuniKorn reads its user from the label " +
		s.UserLabelKey + ", which would name " + quote(user)
}
