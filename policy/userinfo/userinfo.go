// Package userinfo holds the rules of the user.info annotation, the one
// place YuniKorn reads the submitting user and groups of an application
// from (docs/BEHAVIOUR.md §2, §4.1): its key, the exact value YuniKorn's
// admission controller writes, and the well-formedness rules this project
// applies to a value someone supplies. The policy module (TinyGo) and the
// host-side tools (audit, fixtures, benchmarks) import it, so each rule is
// written once. It reads JSON with gjson and writes it by hand: no
// reflection, no recover, nothing TinyGo cannot compile to small code.
package userinfo

import (
	"iter"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

// AnnotationKey is where YuniKorn reads the submitting user and groups.
const AnnotationKey = "yunikorn.apache.org/user.info"

// MaxDepth is how deep a supplied value may nest arrays and objects: an
// object holding a list of groups needs two levels. gjson validates
// recursively, and the policy's stack is small.
const MaxDepth = 16

// Identity is the user and groups a user.info value names. Its JSON form
// (encoding/json) is the value itself, as Value writes it.
type Identity struct {
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Equal reports whether two identities name the same user and the same
// groups in the same order (controllers copy a template's value as is).
func (i Identity) Equal(o Identity) bool {
	return i.User == o.User && slices.Equal(i.Groups, o.Groups)
}

// Value is the user.info value YuniKorn's admission controller writes for
// i (AppendValue).
func (i Identity) Value() string {
	return string(AppendValue(nil, i.User, slices.Values(i.Groups)))
}

// AppendValue appends the user.info value for user and groups to b:
// compact JSON, "user" then "groups", the groups in the order given
// (duplicates kept), an empty user or an empty list of groups left out,
// strings escaped as encoding/json escapes them (HTML escaping on). It is
// byte for byte what YuniKorn's admission controller writes: encoding/json
// of the shim's user and groups, both omitempty.
func AppendValue(b []byte, user string, groups iter.Seq[string]) []byte {
	b = append(b, '{')
	if user != "" {
		b = append(b, `"user":`...)
		b = jsontext.AppendString(b, user)
	}
	n := 0
	if groups != nil {
		groups(func(g string) bool {
			switch {
			case n > 0:
				b = append(b, ',')
			case user != "":
				b = append(b, `,"groups":[`...)
			default:
				b = append(b, `"groups":[`...)
			}
			n++
			b = jsontext.AppendString(b, g)
			return true
		})
	}
	if n > 0 {
		b = append(b, ']')
	}
	return append(b, '}')
}

// Problem is what makes a supplied value unacceptable.
type Problem int

// The problems Check finds, in the order it looks for them.
const (
	NotUTF8        Problem = iota + 1 // the value is not valid UTF-8
	TooDeep                           // it nests deeper than MaxDepth
	NotJSON                           // it is not valid JSON
	NotObject                         // it is not a JSON object (Got)
	DuplicateKey                      // Key occurs twice
	CaseVariantKey                    // Key is Canonical in another case
	UnknownKey                        // Key is neither "user" nor "groups"
	MissingUser                       // there is no "user"
	UserNotString                     // "user" is not a string (Got)
	EmptyUser                         // "user" is ""
	GroupsNotArray                    // "groups" is not an array (Got)
	GroupNotString                    // "groups"[Index] is not a string (Got)
)

// Error says what is wrong with a supplied value.
type Error struct {
	Problem Problem
	// Key is the offending key as decoded (DuplicateKey, CaseVariantKey,
	// UnknownKey); Canonical the key YuniKorn would read it as
	// (CaseVariantKey).
	Key, Canonical string
	// Got is the JSON type found (NotObject, UserNotString,
	// GroupsNotArray, GroupNotString); Index the group's position
	// (GroupNotString).
	Got   string
	Index int
	// Depth is how deep the value nests (TooDeep).
	Depth int
}

// Error is the policy's message, which its denials show after
// "annotation yunikorn.apache.org/user.info is invalid: ".
func (e *Error) Error() string {
	switch e.Problem {
	case NotUTF8:
		return "value is not valid UTF-8"
	case TooDeep:
		return "value nests deeper than " + strconv.Itoa(MaxDepth) + " levels (a user.info value is an object with a list of groups)"
	case NotJSON:
		return "value is not valid JSON"
	case NotObject:
		return "value must be a JSON object like {\"user\":\"alice\",\"groups\":[\"dev\"]}, got " + e.Got
	case DuplicateKey:
		return "duplicate key " + jsontext.Quote(e.Key)
	case CaseVariantKey:
		return "key " + jsontext.Quote(e.Key) + " must be written in lower case: keys are case-sensitive here, but YuniKorn would read it as " + jsontext.Quote(e.Canonical)
	case UnknownKey:
		return "unknown key " + jsontext.Quote(e.Key) + " (only \"user\" and \"groups\" are allowed)"
	case MissingUser:
		return "key \"user\" is required"
	case UserNotString:
		return "\"user\" must be a string, got " + e.Got
	case EmptyUser:
		return "\"user\" must not be empty"
	case GroupsNotArray:
		return "\"groups\" must be an array of strings, got " + e.Got
	case GroupNotString:
		return "\"groups\"[" + strconv.Itoa(e.Index) + "] must be a string, got " + e.Got
	}
	return "invalid value"
}

// Check validates a user.info value that someone supplied rather than the
// policy recorded; nil when it is acceptable. It is stricter than
// YuniKorn's json.Unmarshal on purpose: the shim decodes with Go's
// case-insensitive field matching, where unknown keys are ignored and the
// last duplicate wins, so {"user":"a","USER":"root"} would be read as root.
// Only valid UTF-8 JSON at most MaxDepth levels deep, an object with
// exactly the keys "user" (a non-empty string) and optionally "groups" (an
// array of strings), each once, is accepted. Invalid UTF-8 is refused
// because Go's decoder reads it as U+FFFD, so several distinct values would
// name the same user in YuniKorn.
func Check(value string) *Error {
	_, _, err := check(value)
	return err
}

// Parse is Check, and the identity an acceptable value names, its strings
// decoded as encoding/json decodes them.
func Parse(value string) (Identity, error) {
	user, groups, err := check(value)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{User: jsontext.Str(user)}
	groups.ForEach(func(_, g gjson.Result) bool {
		id.Groups = append(id.Groups, jsontext.Str(g))
		return true
	})
	return id, nil
}

// check is Check, returning the "user" and "groups" members it found.
func check(value string) (user, groups gjson.Result, err *Error) {
	if !utf8.ValidString(value) {
		return user, groups, &Error{Problem: NotUTF8}
	}
	if _, deep := jsontext.TooDeep(value, MaxDepth); deep {
		return user, groups, &Error{Problem: TooDeep, Depth: jsontext.Depth(value)}
	}
	if !gjson.Valid(value) {
		return user, groups, &Error{Problem: NotJSON}
	}
	v := gjson.Parse(value)
	if !v.IsObject() {
		return user, groups, &Error{Problem: NotObject, Got: jsontext.TypeName(v)}
	}
	v.ForEach(func(k, val gjson.Result) bool {
		key := jsontext.Str(k)
		switch key {
		case "user":
			if user.Exists() {
				err = &Error{Problem: DuplicateKey, Key: key}
				return false
			}
			user = val
		case "groups":
			if groups.Exists() {
				err = &Error{Problem: DuplicateKey, Key: key}
				return false
			}
			groups = val
		default:
			if canonical := foldedKey(key); canonical != "" {
				err = &Error{Problem: CaseVariantKey, Key: key, Canonical: canonical}
			} else {
				err = &Error{Problem: UnknownKey, Key: key}
			}
			return false
		}
		return true
	})
	if err != nil {
		return user, groups, err
	}
	switch {
	case !user.Exists():
		return user, groups, &Error{Problem: MissingUser}
	case user.Type != gjson.String:
		return user, groups, &Error{Problem: UserNotString, Got: jsontext.TypeName(user)}
	case jsontext.Str(user) == "":
		return user, groups, &Error{Problem: EmptyUser}
	}
	if groups.Exists() {
		if !groups.IsArray() {
			return user, groups, &Error{Problem: GroupsNotArray, Got: jsontext.TypeName(groups)}
		}
		i := 0
		groups.ForEach(func(_, g gjson.Result) bool {
			if g.Type != gjson.String {
				err = &Error{Problem: GroupNotString, Index: i, Got: jsontext.TypeName(g)}
				return false
			}
			i++
			return true
		})
	}
	return user, groups, err
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

// DefaultLabelKey is the deprecated legacy label that named the user, the
// default of the policy's userLabelKey.
const DefaultLabelKey = "yunikorn.apache.org/username"

// DefaultUser is the user YuniKorn's shim gives a Pod that records none.
const DefaultUser = "nobody"

// OfRecord is the user and groups YuniKorn reads from a Pod's user.info
// value (if it has one) and its legacy user label (userLabelKey): the
// value's user when the value is set (DefaultUser when it is not valid
// JSON or names no user), else the label, else DefaultUser. The policy's
// checks and the host's application index read users with it.
func OfRecord(value string, hasValue bool, label string) (string, []string) {
	if hasValue && value != "" {
		if !gjson.Valid(value) {
			return DefaultUser, nil
		}
		v := gjson.Parse(value)
		user := jsontext.Str(v.Get("user"))
		var groups []string
		v.Get("groups").ForEach(func(_, g gjson.Result) bool {
			groups = append(groups, jsontext.Str(g))
			return true
		})
		if user == "" {
			user = DefaultUser
		}
		return user, groups
	}
	if label != "" {
		return label, nil
	}
	return DefaultUser, nil
}
