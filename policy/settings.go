package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
	"github.com/yunikorn-userinfo/userinfo/policy/boundedre"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
	"github.com/yunikorn-userinfo/userinfo/policy/nsfilter"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Setting keys, as operators write them in the Kubewarden settings object.
const (
	keyBypassAuth       = "bypassAuth"
	keyTrustControllers = "trustControllers"
	keySystemUsers      = "systemUsers"
	keyExternalUsers    = "externalUsers"
	keyExternalGroups   = "externalGroups"
	keyUserLabelKey     = "userLabelKey"
	keyValidateOnly     = "validateOnly"
	keyTrustRBAC        = "trustRBAC"
	keyQueueCheck       = "queueCheck"
	keyConfigValidation = "configValidation"
	keyWorkloads        = "workloads"
	keyTrustPodTokens   = "trustPodTokens"
	keyAppOwnership     = "applicationOwnership"
	keyRecordedGroups   = "recordedGroups"
	keySchedulerUsers   = "schedulerUsers"
)

// knownKeys lists the keys for the unknown-key message.
const knownKeys = "bypassAuth, trustControllers, systemUsers, externalUsers, externalGroups, userLabelKey, validateOnly, trustRBAC, queueCheck, configValidation, workloads, trustPodTokens, applicationOwnership, recordedGroups, schedulerUsers, scheduling, followYuniKornConfig, adopters"

// defaultSystemUsers are the controller identities trusted by default: the
// kube-system service accounts that kube-controller-manager uses with
// --use-service-account-credentials, and its own identity without that flag.
var defaultSystemUsers = []string{
	"^system:serviceaccount:kube-system:",
	"^system:kube-controller-manager$",
}

// DefaultUserLabelKey is the deprecated legacy label that named the user.
const DefaultUserLabelKey = userinfo.DefaultLabelKey

// Settings is the validated policy configuration (docs/BEHAVIOUR.md §3).
type Settings struct {
	BypassAuth       bool
	TrustControllers bool
	SystemUsers      []*regexp.Regexp
	ExternalUsers    []*regexp.Regexp
	ExternalGroups   []*regexp.Regexp
	UserLabelKey     string
	// ValidateOnly makes the policy the validating twin of itself: where
	// the rules would change the object, it refuses it instead
	// (docs/BEHAVIOUR.md §4.9).
	ValidateOnly bool
	// TrustRBAC, when set, lets a submitter that no pattern allows supply
	// the annotation if a SubjectAccessReview for this access allows it
	// (docs/BEHAVIOUR.md §3.1). nil: off.
	TrustRBAC *rbacReview
	// QueueCheck, when set and not off, checks YuniKorn's placement and
	// queue ACLs for new pods (docs/BEHAVIOUR.md §3.2).
	QueueCheck *queueCheckSettings
	// ConfigValidation, when set and not off, checks edits of YuniKorn's
	// ConfigMaps as the scheduler would (docs/BEHAVIOUR.md §3.9).
	ConfigValidation *configValidationSettings
	// Workloads are the custom kinds guarded besides the built-in ones,
	// with the operators trusted to copy their identity
	// (docs/BEHAVIOUR.md §3.3, §3.4).
	Workloads []workloadEntry
	// TrustPodTokens admits, on a Pod created with a token bound to
	// another Pod that is its controller, that Pod's identity
	// (docs/BEHAVIOUR.md §3.4).
	TrustPodTokens bool
	// AppOwnership, when set and not off, refuses or warns about a Pod
	// that joins another user's YuniKorn application (docs/BEHAVIOUR.md
	// §3.5).
	AppOwnership *appOwnershipSettings
	// RecordedGroups shapes the groups written into the annotation
	// (docs/BEHAVIOUR.md §3.6). nil: every group, as sent.
	RecordedGroups *groupShaping
	// SchedulerUsers are the YuniKorn scheduler's identities, whose gang
	// placeholders carry their originator's identity (docs/BEHAVIOUR.md
	// §3.6).
	SchedulerUsers []*regexp.Regexp
	// Scheduling, when set, does the other jobs of YuniKorn's admission
	// controller on Pod CREATE: schedulerName, application ID labels,
	// allow-preemption, ignore-application (docs/BEHAVIOUR.md §3.10).
	// nil: off.
	Scheduling *schedulingSettings
	// Follow, when set, takes the access control and filtering settings
	// from YuniKorn's ConfigMaps, live (docs/BEHAVIOUR.md §3.11). nil: off.
	Follow *followSettings
	// Adopters may record the owner of an object that records none (one
	// created before the policy) by an UPDATE (docs/BEHAVIOUR.md §4.13).
	// nil: no one.
	Adopters *adopterSettings
	// Warnings are the patterns that are valid but probably not what the
	// operator meant (unanchored, or matching the empty string).
	// validate_settings reports them with valid=true.
	Warnings []string
	// Notes explain what a deliberate setting implies (trustPodTokens):
	// nothing is wrong, so validate_settings reports them after "note: ",
	// which hosts log once at start at info level, not as a warning.
	Notes []string
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
		s.SchedulerUsers = mustCompileAll(defaultSchedulerUsers)
		return s, nil
	}
	if !isObject(raw) {
		return nil, &settingsError{problems: []string{"settings: must be a JSON object, got " + typeName(raw)}}
	}
	// The ownership model's parameters, read as the host reads them for
	// its index; what is wrong in them is found below.
	ownership, _, _ := appowners.FromSettings(raw.Raw)
	seen := map[string]bool{}
	raw.ForEach(func(k, v gjson.Result) bool {
		key := str(k)
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
		case keyValidateOnly:
			s.ValidateOnly = parseBool(&errs, key, v, s.ValidateOnly)
		case keyTrustRBAC:
			s.TrustRBAC = parseTrustRBAC(&errs, v)
		case keyQueueCheck:
			s.QueueCheck = parseQueueCheck(&errs, v)
		case keyConfigValidation:
			s.ConfigValidation = parseConfigValidation(&errs, v)
		case keyWorkloads:
			s.Workloads = parseWorkloads(&errs, &s.Warnings, v)
		case keyAppOwnership:
			s.AppOwnership = parseAppOwnership(&errs, v, ownership)
		case keyScheduling:
			s.Scheduling = parseScheduling(&errs, &s.Warnings, v)
		case keyFollow:
			s.Follow = parseFollow(&errs, v)
		case keyAdopters:
			s.Adopters = parseAdopters(&errs, &s.Warnings, v)
		case keyRecordedGroups:
			s.RecordedGroups = parseRecordedGroups(&errs, &s.Warnings, v)
		case keyTrustPodTokens:
			s.TrustPodTokens = parseBool(&errs, key, v, s.TrustPodTokens)
		case keySystemUsers:
			if list, ok := parseList(&errs, key, v); ok {
				s.SystemUsers = compileAll(&errs, &s.Warnings, key, list)
			}
		case keySchedulerUsers:
			if list, ok := parseList(&errs, key, v); ok {
				s.SchedulerUsers = compileAll(&errs, &s.Warnings, key, list)
			}
		case keyExternalUsers:
			if list, ok := parseList(&errs, key, v); ok {
				s.ExternalUsers = compileAll(&errs, &s.Warnings, key, list)
			}
		case keyExternalGroups:
			if list, ok := parseList(&errs, key, v); ok {
				s.ExternalGroups = compileAll(&errs, &s.Warnings, key, list)
			}
		case keyUserLabelKey:
			switch {
			case v.Type != gjson.String:
				errs.problems = append(errs.problems, "settings."+key+": must be a string, got "+describe(v))
			case strings.TrimSpace(str(v)) == "":
				errs.problems = append(errs.problems, "settings."+key+": must not be empty")
			default:
				s.UserLabelKey = str(v)
			}
		default:
			errs.problems = append(errs.problems, "settings: unknown key "+quote(key)+" (known keys: "+knownKeys+")")
		}
		return true
	})
	reconcileScheduling(&errs, s)
	if len(errs.problems) > 0 {
		return nil, &errs
	}
	if !seen[keySystemUsers] {
		s.SystemUsers = mustCompileAll(defaultSystemUsers)
	}
	if !seen[keySchedulerUsers] {
		s.SchedulerUsers = mustCompileAll(defaultSchedulerUsers)
	}
	if s.TrustPodTokens {
		s.Notes = append(s.Notes, msgPodTokenBoundary)
	}
	followWarnings(s, seen)
	return s, nil
}

// trustRBACKeys lists the keys of a trustRBAC object for the unknown-key
// message.
const trustRBACKeys = "verb, group, resource, groupsResource, acceptWildcardGrants, maxGroups"

// msgPodTokenBoundary is the note on settings with trustPodTokens: who
// may act as a driver Pod, and so give its identity to the Pods they create
// (docs/BEHAVIOUR.md §3.4).
const msgPodTokenBoundary = "settings." + keyTrustPodTokens + ": a Pod created with a token bound to a driver Pod may carry the driver's identity, " +
	"so whoever may create tokens for the driver's service account (serviceaccounts/token), exec or attach into the driver (pods/exec, pods/attach), " +
	"change its image (pods update) or add a container to it (pods/ephemeralcontainers) may act as the driver; the built-in edit and admin roles grant all but the last in their namespace"

// parseTrustRBAC reads trustRBAC: a boolean (true asks the default
// reviews), or an object naming the reviews' verb, API group, resource
// (for the claimed user) and groupsResource (for each claimed group),
// whether wildcard grants count, and the most groups a claim may carry;
// each defaults to the default review's.
func parseTrustRBAC(errs *settingsError, v gjson.Result) *rbacReview {
	switch v.Type {
	case gjson.True:
		r := defaultRBACReview
		return &r
	case gjson.False:
		return nil
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, "settings."+keyTrustRBAC+": must be a boolean or an object with "+trustRBACKeys+", got "+describe(v))
		return nil
	}
	r := defaultRBACReview
	eachMember(errs, "settings."+keyTrustRBAC, v, func(name, path string, f gjson.Result) {
		var dst *string
		probe := ""
		switch name {
		case "verb":
			dst, probe = &r.Verb, probeVerb
		case "group":
			dst, probe = &r.Group, probeGroup
		case "resource", "groupsResource":
			dst, probe = &r.Resource, probeResource
			if name == "groupsResource" {
				dst = &r.GroupsResource
			}
		case "acceptWildcardGrants":
			if f.Type != gjson.True && f.Type != gjson.False {
				errs.problems = append(errs.problems, path+": must be a boolean, got "+describe(f))
				return
			}
			r.AcceptWildcardGrants = f.Type == gjson.True
			return
		case "maxGroups":
			n, err := strconv.Atoi(f.Raw)
			if f.Type != gjson.Number || err != nil || n < 0 || n > maxRBACMaxGroups {
				errs.problems = append(errs.problems, path+": must be a whole number from 0 to "+strconv.Itoa(maxRBACMaxGroups)+
					" (the reviews of a claim grow with its groups), got "+describe(f))
				return
			}
			r.MaxGroups = n
			return
		default:
			errs.problems = append(errs.problems, "settings."+keyTrustRBAC+": unknown key "+quote(name)+" (known keys: "+trustRBACKeys+")")
			return
		}
		switch {
		case f.Type != gjson.String:
			errs.problems = append(errs.problems, path+": must be a string, got "+describe(f))
		case name != "group" && strings.TrimSpace(str(f)) == "":
			errs.problems = append(errs.problems, path+": must not be empty")
		case strings.TrimSpace(str(f)) != str(f) || strings.ContainsAny(str(f), "/ "):
			errs.problems = append(errs.problems, path+": must be a single RBAC name without spaces or slashes, got "+quote(str(f)))
		case str(f) == probe:
			errs.problems = append(errs.problems, path+": "+quote(probe)+" is the name of the wildcard probe, which no rule may grant: choose another")
		default:
			*dst = str(f)
		}
	})
	if r.GroupsResource == r.Resource {
		errs.problems = append(errs.problems, "settings."+keyTrustRBAC+": resource and groupsResource are both "+quote(r.Resource)+
			": they must differ, or a grant to claim a user would also let the submitter claim a group of that name")
	}
	return &r
}

// eachMember calls f with each member of the settings object v at path,
// reporting a key given twice instead.
func eachMember(errs *settingsError, path string, v gjson.Result, f func(name, path string, value gjson.Result)) {
	jsonx.EachMember(&errs.problems, path, v, f)
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
// YuniKorn's configmap has it (pieces are trimmed, as YuniKorn does; array
// entries are kept as written). Both forms are checked alike: no entry may
// be empty or blank, since an empty pattern matches every name (YuniKorn
// skips empty pieces; here a stray comma is an error to fix, not something
// to guess about), except that the string "" as a whole is the empty list.
// A list that is set replaces the default.
func parseList(errs *settingsError, key string, v gjson.Result) ([]string, bool) {
	var out []string
	ok := true
	add := func(i int, p, form string) {
		if strings.TrimSpace(p) == "" {
			errs.problems = append(errs.problems, "settings."+key+"["+strconv.Itoa(i)+"]: empty pattern"+form+
				": it would match every name; remove it (an empty list trusts no one)")
			ok = false
			return
		}
		out = append(out, p)
	}
	switch {
	case v.Type == gjson.String:
		list := str(v)
		if strings.TrimSpace(list) == "" {
			return nil, true
		}
		pieces, err := nsfilter.SplitPatterns(list)
		if err != "" {
			errs.problems = append(errs.problems, "settings."+key+": "+err)
			return nil, false
		}
		for i, piece := range pieces {
			add(i, strings.TrimSpace(piece), " (between commas)")
		}
		return out, ok
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if e.Type != gjson.String {
				errs.problems = append(errs.problems, "settings."+key+"["+strconv.Itoa(i)+"]: must be a string, got "+describe(e))
				ok = false
			} else if why := listInEntry(str(e)); why != "" {
				errs.problems = append(errs.problems, "settings."+key+"["+strconv.Itoa(i)+"]: "+why)
				ok = false
			} else {
				add(i, str(e), "")
			}
			i++
			return true
		})
		return out, ok
	}
	errs.problems = append(errs.problems, "settings."+key+": must be a list of regular expressions (an array of strings or one comma-separated string), got "+describe(v))
	return nil, false
}

// listInEntry says why an array entry is a comma-separated list rather
// than one pattern, or "" when it is not: split as the string form is, a
// piece is empty (a stray comma, as in "^livy$,") or a piece ends with $
// or starts with ^ at a comma ("^a$,^b$"). YuniKorn's configmap splits
// such strings at commas; as one pattern, the entry would match only
// names with a comma in them (or, for "^a$,^b$", none), so it is refused
// rather than taken silently.
func listInEntry(entry string) string {
	pieces, err := splitPatterns(entry)
	if err != "" || len(pieces) < 2 {
		return ""
	}
	var want []string
	list := false
	for i, piece := range pieces {
		t := strings.TrimSpace(piece)
		if t == "" || i < len(pieces)-1 && strings.HasSuffix(t, "$") || i > 0 && strings.HasPrefix(t, "^") {
			list = true
		}
		if t != "" {
			want = append(want, quote(t))
		}
	}
	if !list {
		return ""
	}
	return "pattern " + quote(entry) + " is a comma-separated list in one array entry: as one pattern it matches only names with a comma; " +
		"write each pattern as its own entry: [" + strings.Join(want, ", ") + "]"
}

// splitPatterns splits a comma-separated list of regular expressions at
// the commas that separate patterns: not at an escaped comma, nor inside
// a character class, a repetition like {1,8}, or parentheses, where the
// comma belongs to the pattern. A list whose brackets do not balance is an
// error rather than a guess.
func splitPatterns(list string) ([]string, string) { return nsfilter.SplitPatterns(list) }

// compileAll compiles the patterns of one setting, and records a warning
// for each that is probably a mistake: one that matches the empty string
// (so, searched anywhere, every name) and one anchored at neither end (so
// it matches every name that contains a match anywhere).
func compileAll(errs *settingsError, warnings *[]string, key string, patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for i, p := range patterns {
		field := "settings." + key + "[" + strconv.Itoa(i) + "]"
		re, err := boundedre.Compile(p)
		if _, deep := err.(*boundedre.TooDeepError); deep {
			errs.problems = append(errs.problems, field+": regular expression "+quote(p)+" "+err.Error()+"; write it flatter")
			continue
		}
		if err != nil {
			errs.problems = append(errs.problems, field+": invalid regular expression "+quote(p)+": "+err.Error())
			continue
		}
		switch {
		case re.MatchString(""):
			*warnings = append(*warnings, field+": pattern "+quote(p)+" matches the empty string, so it may match every name")
		case !anchored(p):
			*warnings = append(*warnings, field+": pattern "+quote(p)+" is not anchored with ^ or $, so it matches every name that contains a match anywhere")
		}
		out = append(out, re)
	}
	return out
}

// anchored reports whether a pattern starts with ^ or \A or ends with $ or
// \z (an escaped \$ is a literal dollar, not an anchor): anchored at one
// end it is a prefix (or suffix) match, which is what "^system:" means;
// anchored at neither it matches a name that contains a match anywhere.
func anchored(p string) bool {
	begins := strings.HasPrefix(p, "^") || strings.HasPrefix(p, `\A`)
	ends := strings.HasSuffix(p, `\z`) ||
		(strings.HasSuffix(p, "$") && (len(p)-len(strings.TrimRight(strings.TrimSuffix(p, "$"), `\`))-1)%2 == 0)
	return begins || ends
}

func mustCompileAll(patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
}

// matchAny reports whether any pattern matches s (an unanchored search,
// as YuniKorn's).
func matchAny(patterns []*regexp.Regexp, s string) bool { return nsfilter.MatchAny(patterns, s) }

// groupShaping is recordedGroups: which of the submitter's groups the
// annotation records. Only groups of request.userInfo are ever written;
// the shaping can only leave some out.
type groupShaping struct {
	// Omit writes no groups at all, so that YuniKorn resolves them itself.
	Omit bool
	// Include, when not empty, keeps only the groups one of them matches.
	Include []*regexp.Regexp
	// Exclude drops the groups one of them matches (after Include).
	Exclude []*regexp.Regexp
}

// keeps reports whether group g is recorded.
func (g *groupShaping) keeps(group string) bool {
	if g == nil {
		return true
	}
	if g.Omit {
		return false
	}
	if len(g.Include) > 0 && !matchAny(g.Include, group) {
		return false
	}
	return !matchAny(g.Exclude, group)
}

// parseRecordedGroups reads recordedGroups: an object with omit (a
// boolean), include and exclude (lists of regular expressions, as the
// other lists). Omit together with a list is an error: the list would
// have no effect.
func parseRecordedGroups(errs *settingsError, warnings *[]string, v gjson.Result) *groupShaping {
	const path = "settings." + keyRecordedGroups
	if v.Type == gjson.Null {
		return nil
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, path+": must be an object with omit, include and exclude, got "+describe(v))
		return nil
	}
	g := &groupShaping{}
	eachMember(errs, path, v, func(name, field string, f gjson.Result) {
		key := keyRecordedGroups + "." + name
		switch name {
		case "omit":
			g.Omit = parseBool(errs, key, f, false)
		case "include":
			if list, ok := parseList(errs, key, f); ok {
				g.Include = compileAll(errs, warnings, key, list)
			}
		case "exclude":
			if list, ok := parseList(errs, key, f); ok {
				g.Exclude = compileAll(errs, warnings, key, list)
			}
		default:
			errs.problems = append(errs.problems, path+": unknown key "+quote(name)+" (known keys: omit, include, exclude)")
		}
	})
	if g.Omit && (len(g.Include) > 0 || len(g.Exclude) > 0) {
		errs.problems = append(errs.problems, path+": omit is true, so include and exclude would have no effect: set omit or the lists, not both")
	}
	return g
}
