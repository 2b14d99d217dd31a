package main

import (
	"regexp"

	"github.com/tidwall/gjson"
)

// Adoption: an object created before the policy records no owner, and no
// UPDATE may add one (§4.3), except from an identity that settings.adopters
// trusts for that (docs/BEHAVIOUR.md §4.13). The adopter names the owner;
// the request passes through the API server, so this webhook judges it.

// keyAdopters is the setting naming the adopters.
const keyAdopters = "adopters"

// adopterSettings is settings.adopters: the users (service accounts
// included, as system:serviceaccount:<namespace>:<name>) and the groups
// trusted to record the owner of an object that records none.
type adopterSettings struct {
	users, groups []*regexp.Regexp
}

// adopters lists the keys of settings.adopters for the unknown-key message.
const adopterKeys = "users, groups"

// parseAdopters reads settings.adopters: null (no adopter), or an object
// with users and groups, lists of regular expressions as the other lists.
func parseAdopters(errs *settingsError, warnings *[]string, v gjson.Result) *adopterSettings {
	const path = "settings." + keyAdopters
	if v.Type == gjson.Null {
		return nil
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, path+": must be an object with "+adopterKeys+
			" (lists of regular expressions naming who may adopt objects that record no owner), got "+describe(v))
		return nil
	}
	a := &adopterSettings{}
	eachMember(errs, path, v, func(name, _ string, f gjson.Result) {
		key := keyAdopters + "." + name
		var dst *[]*regexp.Regexp
		switch name {
		case "users":
			dst = &a.users
		case "groups":
			dst = &a.groups
		default:
			errs.problems = append(errs.problems, path+": unknown key "+quote(name)+" (known keys: "+adopterKeys+")")
			return
		}
		if list, ok := parseList(errs, key, f); ok {
			*dst = compileAll(errs, warnings, key, list)
		}
	})
	if len(a.users) == 0 && len(a.groups) == 0 {
		return nil
	}
	return a
}

// adopter reports whether id may adopt: a users pattern matches its name,
// or a groups pattern one of its groups.
func (s *Settings) adopter(id identity) bool {
	a := s.Adopters
	if a == nil {
		return false
	}
	if matchAny(a.users, id.user) {
		return true
	}
	found := false
	id.eachGroup(func(g string) bool {
		found = matchAny(a.groups, g)
		return !found
	})
	return found
}

// Messages of adoption (docs/BEHAVIOUR.md §4.13).
const (
	msgNoOwnerNoAdopters = "the object records no owner (it was created before the policy), and only an adopter may record one: settings." +
		keyAdopters + " names none"
	msgReadopt = "the object already records an owner: adoption records the owner of an object that records none, and never changes one"
)

// msgNotAdopter is the refusal of an UPDATE that adds the annotation to an
// object that records no owner, from someone who is not an adopter.
func msgNotAdopter(s *Settings, id identity) string {
	if s.Adopters == nil {
		return msgNoOwnerNoAdopters
	}
	b := []byte("the object records no owner (it was created before the policy), and only an adopter may record one: user " + id.user + " with groups [")
	b = id.appendGroups(b, func(b []byte, g string) []byte { return append(b, g...) })
	return string(append(b, "] is not one of settings."+keyAdopters...))
}

// decideAdopt decides an UPDATE that adds value where the object recorded
// no owner; at names where (for a workload kind's refusal, "" otherwise).
func decideAdopt(s *Settings, id identity, value, at string) decision {
	prefix := msgChangeNotAllowed + ": "
	if at != "" {
		prefix += at + ": "
	}
	if !s.adopter(id) {
		d := reject("update: added, not an adopter", codeForbidden, prefix+msgNotAdopter(s, id))
		d.claim(value)
		return d
	}
	if problem := checkSuppliedValue(value); problem != "" {
		d := reject("update: adopted, invalid value", codeMalformed, "annotation "+AnnotationKey+" is invalid: "+problem)
		d.claim(value)
		return d
	}
	d := accept("update: adopted")
	d.claim(value)
	return d
}

// readoptRefusal words the refusal of a change: for an adopter, it says
// that an owned object cannot be adopted again.
func readoptRefusal(s *Settings, id identity, d decision) decision {
	if d.accepted || !s.adopter(id) {
		return d
	}
	d.rule = "update: changed, re-adoption"
	d.message += ": " + msgReadopt
	return d
}
