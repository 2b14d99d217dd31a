package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Setting keys, as operators write them in the Kubewarden settings object.
const (
	keyBypassAuth       = "bypassAuth"
	keyTrustControllers = "trustControllers"
	keySystemUsers      = "systemUsers"
	keyExternalUsers    = "externalUsers"
	keyExternalGroups   = "externalGroups"
	keyUserLabelKey     = "userLabelKey"
)

// defaultSystemUsers are the controller identities trusted by default: the
// kube-system service accounts that kube-controller-manager uses with
// --use-service-account-credentials, and its own identity without that flag.
var defaultSystemUsers = []string{
	"^system:serviceaccount:kube-system:",
	"^system:kube-controller-manager$",
}

// DefaultUserLabelKey is the deprecated legacy label that named the user.
const DefaultUserLabelKey = "yunikorn.apache.org/username"

// Settings is the validated policy configuration (SPEC §3).
type Settings struct {
	BypassAuth       bool
	TrustControllers bool
	SystemUsers      []*regexp.Regexp
	ExternalUsers    []*regexp.Regexp
	ExternalGroups   []*regexp.Regexp
	UserLabelKey     string
}

// settingsError lists every problem found in a settings object, so an
// operator fixes them all in one round.
type settingsError struct{ problems []string }

func (e *settingsError) Error() string { return strings.Join(e.problems, "; ") }

// parseSettings validates and compiles a settings object. Absent and null
// settings mean all defaults. Unknown keys, wrong types and regular
// expressions that do not compile are errors naming the key and the value.
func parseSettings(raw gjson.Result) (*Settings, error) {
	s := &Settings{TrustControllers: true, UserLabelKey: DefaultUserLabelKey}
	var errs settingsError
	if !present(raw) {
		s.SystemUsers = mustCompileAll(defaultSystemUsers)
		return s, nil
	}
	if !isObject(raw) {
		return nil, &settingsError{problems: []string{"settings: must be a JSON object, got " + typeName(raw)}}
	}
	seen := map[string]bool{}
	raw.ForEach(func(k, v gjson.Result) bool {
		key := k.Str
		if seen[key] {
			errs.problems = append(errs.problems, "settings."+key+": duplicate key")
			return true
		}
		seen[key] = true
		switch key {
		case keyBypassAuth:
			s.BypassAuth = parseBool(&errs, key, v, s.BypassAuth)
		case keyTrustControllers:
			s.TrustControllers = parseBool(&errs, key, v, s.TrustControllers)
		case keySystemUsers:
			if list, ok := parseList(&errs, key, v); ok {
				s.SystemUsers = compileAll(&errs, key, list)
			}
		case keyExternalUsers:
			if list, ok := parseList(&errs, key, v); ok {
				s.ExternalUsers = compileAll(&errs, key, list)
			}
		case keyExternalGroups:
			if list, ok := parseList(&errs, key, v); ok {
				s.ExternalGroups = compileAll(&errs, key, list)
			}
		case keyUserLabelKey:
			switch {
			case v.Type != gjson.String:
				errs.problems = append(errs.problems, "settings."+key+": must be a string, got "+describe(v))
			case strings.TrimSpace(v.Str) == "":
				errs.problems = append(errs.problems, "settings."+key+": must not be empty")
			default:
				s.UserLabelKey = v.Str
			}
		default:
			errs.problems = append(errs.problems, "settings: unknown key "+quote(key)+
				" (known keys: bypassAuth, trustControllers, systemUsers, externalUsers, externalGroups, userLabelKey)")
		}
		return true
	})
	if len(errs.problems) > 0 {
		return nil, &errs
	}
	if !seen[keySystemUsers] {
		s.SystemUsers = mustCompileAll(defaultSystemUsers)
	}
	return s, nil
}

// parseBool accepts only JSON booleans: "true" as a string is a typo that
// would otherwise silently fall back to a default, as it does in YuniKorn.
func parseBool(errs *settingsError, key string, v gjson.Result, def bool) bool {
	switch v.Type {
	case gjson.True:
		return true
	case gjson.False:
		return false
	}
	errs.problems = append(errs.problems, "settings."+key+": must be a boolean, got "+describe(v))
	return def
}

// parseList accepts an array of strings, or one comma-separated string as
// YuniKorn's configmap has it: pieces trimmed, empty pieces skipped, so ""
// is an empty list. A list that is set replaces the default.
func parseList(errs *settingsError, key string, v gjson.Result) ([]string, bool) {
	switch {
	case v.Type == gjson.String:
		var out []string
		for _, piece := range strings.Split(v.Str, ",") {
			if p := strings.TrimSpace(piece); p != "" {
				out = append(out, p)
			}
		}
		return out, true
	case v.IsArray():
		var out []string
		ok := true
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if e.Type != gjson.String {
				errs.problems = append(errs.problems, "settings."+key+"["+strconv.Itoa(i)+"]: must be a string, got "+describe(e))
				ok = false
			} else {
				out = append(out, e.Str)
			}
			i++
			return true
		})
		return out, ok
	}
	errs.problems = append(errs.problems, "settings."+key+": must be a list of regular expressions (an array of strings or one comma-separated string), got "+describe(v))
	return nil, false
}

func compileAll(errs *settingsError, key string, patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			errs.problems = append(errs.problems, "settings."+key+"["+strconv.Itoa(i)+"]: invalid regular expression "+quote(p)+": "+err.Error())
			continue
		}
		out = append(out, re)
	}
	return out
}

func mustCompileAll(patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
}

// matchAny reports whether any pattern matches s. Matching is an unanchored
// search, as YuniKorn's regexp.MatchString: anchors are the operator's job.
func matchAny(patterns []*regexp.Regexp, s string) bool {
	for _, re := range patterns {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
