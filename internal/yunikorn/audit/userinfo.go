package audit

import (
	"errors"
	"fmt"

	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// AnnotationKey is the annotation YuniKorn reads the submitting user from
// (docs/BEHAVIOUR.md §2): userinfo.AnnotationKey.
const AnnotationKey = userinfo.AnnotationKey

// Identity is a parsed user.info value.
type Identity = userinfo.Identity

// ParseUserInfo reads a user.info value with the rules the policy applies
// to a value someone supplies (docs/BEHAVIOUR.md §4.1, userinfo.Check):
// valid UTF-8 JSON, at most 16 levels deep, an object with exactly the
// lower-case keys "user" (a non-empty string, required) and "groups" (an
// array of strings), each once. Go's decoder, which YuniKorn's shim uses,
// matches keys without regard to case and keeps the last duplicate, so a
// value that breaks these rules can name a different user to YuniKorn than
// it seems to. The error says what is wrong; for a value nested too deep
// it says how deep, which a report reader needs more than the policy's
// reminder of the value's shape.
func ParseUserInfo(value string) (Identity, error) {
	id, err := userinfo.Parse(value)
	var e *userinfo.Error
	if errors.As(err, &e) {
		switch e.Problem {
		case userinfo.TooDeep:
			return id, fmt.Errorf("value nests %d levels deep, more than %d", e.Depth, userinfo.MaxDepth)
		case userinfo.CaseVariantKey:
			return id, fmt.Errorf("key %q must be written in lower case: YuniKorn would read it as %q", e.Key, e.Canonical)
		}
	}
	return id, err
}
