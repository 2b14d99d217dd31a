package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/acconf"
)

// followYuniKornConfig (docs/BEHAVIOUR.md §3.11): the access control and
// filtering settings follow the admissionController.* keys of YuniKorn's
// ConfigMaps, read live through the host's get_resource capability and
// mapped by policy/acconf, the mapping migrate prints. A key the
// ConfigMaps set wins over the settings; a key they do not set keeps the
// settings' value; bypassAuth "true" is never followed (the hand-over of
// YuniKorn's admission controller, acconf.HandOverText). A value YuniKorn
// cannot use, or ConfigMaps that cannot be read, never take the rules
// down: the value last read stays in force (in a host that keeps
// instances, as serve does), else the settings' value, and every answer
// says so in a warning.

const keyFollow = "followYuniKornConfig"

const followKeys = "namespace"

// followSettings say where YuniKorn's ConfigMaps are.
type followSettings struct {
	namespace string
}

// parseFollow reads followYuniKornConfig: a boolean (true: YuniKorn's
// default namespace, yunikorn) or an object with namespace.
func parseFollow(errs *settingsError, v gjson.Result) *followSettings {
	const path = "settings." + keyFollow
	switch v.Type {
	case gjson.True:
		return &followSettings{namespace: defaultQueueCheck.namespace}
	case gjson.False:
		return nil
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, path+": must be a boolean or an object with "+followKeys+", got "+describe(v))
		return nil
	}
	f := &followSettings{namespace: defaultQueueCheck.namespace}
	eachMember(errs, path, v, func(name, field string, m gjson.Result) {
		switch name {
		case "namespace":
			switch {
			case m.Type != gjson.String:
				errs.problems = append(errs.problems, field+": must be a string, got "+describe(m))
			case strings.TrimSpace(str(m)) == "" || strings.ContainsAny(str(m), " /"):
				errs.problems = append(errs.problems, field+": must be a namespace name (not empty, no spaces or slashes), got "+quote(str(m)))
			default:
				f.namespace = str(m)
			}
		default:
			errs.problems = append(errs.problems, path+": unknown key "+quote(name)+" (known keys: "+followKeys+")")
		}
	})
	return f
}

// followedSettingKeys are the settings the ConfigMaps' keys replace.
var followedSettingKeys = []string{keyBypassAuth, keyTrustControllers, keySystemUsers, keyExternalUsers, keyExternalGroups}

// followWarnings: a followed setting that is also set in the settings is
// the fallback only (validate_settings says so).
func followWarnings(s *Settings, seen map[string]bool) {
	if s.Follow == nil {
		return
	}
	for _, k := range followedSettingKeys {
		if seen[k] {
			s.Warnings = append(s.Warnings, "settings."+k+": "+keyFollow+" is on, so the admissionController.accessControl key of "+
				configMapConfigs+" in namespace "+s.Follow.namespace+" decides while it is set there; this value is in force only where it is not")
		}
	}
}

// The followed rules, kept across evaluations while the instance lives
// (serve keeps instances; under policy-server every evaluation reads the
// ConfigMaps again through policy-server's cache), keyed by the settings
// and the two ConfigMaps' resourceVersions. good holds the last value
// read of each key YuniKorn could use.
var followCache struct {
	sync.Mutex
	base     *Settings
	version  string
	eff      *Settings
	warnings []string
	good     map[string]acconf.Field
}

// followed returns the settings in force for this evaluation, and the
// warnings every answer carries while they are not what the ConfigMaps
// say.
func followed(base *Settings) (*Settings, []string) {
	f := base.Follow
	followCache.Lock()
	defer followCache.Unlock()
	if followCache.base != base {
		followCache.base, followCache.version, followCache.eff, followCache.warnings = base, "", nil, nil
		followCache.good = map[string]acconf.Field{}
	}
	where := f.namespace + "/" + configMapConfigs
	if followCache.version != "" {
		v, err := configMapVersions(f.namespace)
		if err == nil && v == followCache.version {
			return followCache.eff, followCache.warnings
		}
	}
	var flat flatConfig
	var found [2]bool
	var rv [2]string
	for i, name := range [...]string{configMapDefaults, configMapConfigs} {
		obj, ok, err := getObject("v1", "ConfigMap", f.namespace, name, false)
		if err != nil {
			return followUnreadable(base, where, err.Error())
		}
		if ok {
			flat.maps[i] = gjson.Parse(obj)
			found[i], rv[i] = true, flat.maps[i].Get("metadata.resourceVersion").String()
		}
	}
	eff, warnings := applyFollowed(base, flat, where)
	if !found[0] && !found[1] {
		warnings = append(warnings, keyFollow+": neither "+configMapDefaults+" nor "+configMapConfigs+" exists in namespace "+
			f.namespace+": the settings' own values are in force")
	}
	followCache.eff, followCache.warnings = eff, warnings
	followCache.version = ""
	if rv[0] != "" || !found[0] {
		if rv[1] != "" || !found[1] {
			followCache.version = followVersionKey(found, rv)
		}
	}
	return eff, warnings
}

// followUnreadable is what is in force when the ConfigMaps cannot be
// read: the rules last read, else the settings.
func followUnreadable(base *Settings, where, why string) (*Settings, []string) {
	logWarning(keyFollow+": ConfigMaps not read", why)
	if followCache.eff != nil {
		w := keyFollow + ": " + why + ": the rules last read from " + where + " stay in force"
		return followCache.eff, append(withoutUnreadable(followCache.warnings), w)
	}
	return base, []string{keyFollow + ": " + why + ": the settings' own values are in force"}
}

func withoutUnreadable(ws []string) []string {
	out := make([]string, 0, len(ws)+1)
	for _, w := range ws {
		if !strings.HasSuffix(w, " stay in force") {
			out = append(out, w)
		}
	}
	return out
}

// followVersionKey names what was read: both maps' resourceVersions.
func followVersionKey(found [2]bool, rv [2]string) string {
	key := ""
	for i := range rv {
		if !found[i] {
			key += "\x00-"
		} else {
			key += "\x00" + rv[i]
		}
	}
	return key
}

// configMapVersions reads the two ConfigMaps' resourceVersions (masked:
// the host sends nothing else) as followVersionKey words them.
func configMapVersions(namespace string) (string, error) {
	var rv [2]string
	var found [2]bool
	for i, name := range [...]string{configMapDefaults, configMapConfigs} {
		b := make([]byte, 0, 200)
		b = append(b, `{"api_version":"v1","kind":"ConfigMap","name":`...)
		b = appendJSONString(b, name)
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, namespace)
		b = append(b, `,"disable_cache":false,"field_masks":["metadata.resourceVersion"]}`...)
		out, err := callHost("kubewarden", "kubernetes", "get_resource", b)
		if err != nil {
			if strings.HasPrefix(err.Error(), "Cannot find ") {
				continue
			}
			return "", err
		}
		found[i] = true
		rv[i] = gjson.GetBytes(out, "metadata.resourceVersion").String()
		if rv[i] == "" {
			return "", errString("no resourceVersion")
		}
	}
	return followVersionKey(found, rv), nil
}

// applyFollowed maps the ConfigMaps' keys (acconf) over base. The mapping's
// remarks are logged; a key whose value cannot be used keeps the value
// last read, else the settings', with a warning.
func applyFollowed(base *Settings, flat flatConfig, where string) (*Settings, []string) {
	eff := *base
	var warnings []string
	unreadable := map[string]string{}
	m := &acconf.Mapper{Look: func(key string) acconf.Entry {
		v, set, err := flat.get(key)
		if err != nil {
			unreadable[key] = err.Error()
			return acconf.Entry{}
		}
		from := ""
		if set {
			if _, inConfigs, _ := (flatConfig{maps: [2]gjson.Result{{}, flat.maps[1]}}).get(key); !inConfigs {
				from = " (from " + configMapDefaults + ")"
			}
		}
		return acconf.Entry{Value: v, Set: set, From: from}
	}}
	use := func(f acconf.Field) (acconf.Field, bool) {
		why, bad := unreadable[f.Key]
		if f.Invalid {
			bad, why = true, "its value is not one YuniKorn can use"
		}
		if piece, ok := splitPiece(f); !bad && ok {
			bad, why = true, "YuniKorn splits it at every comma, also one inside {m,n}, [...] or (...), and piece "+quote(piece)+
				" is not a whole pattern (write the pattern without a comma)"
		}
		if !bad {
			if f.Set {
				followCache.good[f.Key] = f
			}
			return f, f.Set
		}
		last, ok := followCache.good[f.Key]
		kept := "the settings' own value"
		if ok {
			kept = "the value last read"
		}
		warnings = append(warnings, keyFollow+": "+f.Key+" in "+where+": "+why+" (see the policy's log); "+kept+" stays in force until it is fixed")
		return last, ok
	}
	compile := func(f acconf.Field) []*regexp.Regexp {
		var errs settingsError
		var ws []string
		out := compileAll(&errs, &ws, f.Setting, f.Patterns)
		for _, w := range ws {
			logWarning(keyFollow+": "+f.Key, w)
		}
		return out
	}
	if f, ok := use(m.BypassAuth()); ok {
		eff.BypassAuth = f.Bool
	}
	if f, ok := use(m.TrustControllers()); ok {
		eff.TrustControllers = f.Bool
	}
	if f, ok := use(m.SystemUsers()); ok {
		eff.SystemUsers = compile(f)
	}
	if f, ok := use(m.External(false)); ok {
		eff.ExternalUsers = compile(f)
	}
	if f, ok := use(m.External(true)); ok {
		eff.ExternalGroups = compile(f)
	}
	// The filtering keys: into scheduling when the policy does the
	// scheduling jobs; generateUniqueAppId compared with
	// applicationOwnership's.
	if base.Scheduling != nil || base.AppOwnership != nil {
		var sc *schedulingSettings
		if base.Scheduling != nil {
			c := *base.Scheduling
			sc = &c
			eff.Scheduling = sc
			for _, l := range []struct {
				key, def string
				dst      *[]*regexp.Regexp
			}{
				{acconf.KeyProcessNamespaces, "", &sc.process},
				{acconf.KeyBypassNamespaces, acconf.DefaultBypassNamespaces, &sc.bypass},
				{acconf.KeyLabelNamespaces, "", &sc.label},
				{acconf.KeyNoLabelNamespaces, "", &sc.noLabel},
			} {
				if f, ok := use(m.List(l.key, keyScheduling+"."+strings.TrimPrefix(l.key, "admissionController.filtering."), l.def)); ok {
					*l.dst = compile(f)
				}
			}
		}
		// YuniKorn's admission controller reads generateUniqueAppId
		// live, its scheduler only when it starts: the ID the scheduling
		// jobs write follows it, the ownership model keeps its settings'
		// value and says when the two differ.
		unique := m.Bool(acconf.KeyGenerateUniqueAppID, keyScheduling+".generateUniqueAppIds", false)
		if f, ok := use(unique); ok && sc != nil {
			sc.uniqueAppIDs = f.Bool
		}
		if ao := base.AppOwnership; ao != nil && ao.mode != queueCheckOff && !unique.Invalid && unique.Bool != ao.opts.UniqueAppIDs {
			warnings = append(warnings, uniqueAppIDsApart(unique, ao.opts.UniqueAppIDs, where))
		}
	}
	for _, n := range m.Notes {
		if n.Status != acconf.Invalid {
			logInfo(keyFollow+": "+n.Key+": "+string(n.Status), n.Text)
		} else {
			logWarning(keyFollow+": "+n.Key+": "+string(n.Status), n.Text)
		}
	}
	return &eff, warnings
}

// splitPiece is the first piece of the followed list f that YuniKorn's
// split at every comma leaves unbalanced (acconf.Balanced): a pattern cut
// at a comma of its own, as ^svc-[a-z]{1,8}$ into ^svc-[a-z]{1 and 8}$,
// which would match names no one meant (mallory8}).
func splitPiece(f acconf.Field) (string, bool) {
	if !f.List || !f.Set || f.Invalid {
		return "", false
	}
	for _, p := range f.Patterns {
		if !acconf.Balanced(p) {
			return p, true
		}
	}
	return "", false
}

// uniqueAppIDsApart is the warning on every answer while the followed
// generateUniqueAppId (unique, as YuniKorn's scheduler would read it when
// it starts) is not the ownership model's (model, from the settings).
// YuniKorn's scheduler reads the key only when it starts (k8shim v1.9
// pkg/conf: "restart required"), so a running scheduler may still use the
// other value, which this policy cannot see: the model keeps the settings'
// value, which the operator changes when the scheduler restarts.
func uniqueAppIDsApart(unique acconf.Field, model bool, where string) string {
	value := "is " + strconv.FormatBool(unique.Bool)
	if !unique.Set {
		value = "is not set (YuniKorn's default: false)"
	}
	return keyFollow + ": " + acconf.KeyGenerateUniqueAppID + " in " + where + " " + value + ", while " + keyAppOwnership +
		" checks with generateUniqueAppIds " + strconv.FormatBool(model) + " from its settings. YuniKorn's scheduler reads the key " +
		"only when it starts (restart required), so the check does not follow it: once the scheduler runs with " +
		strconv.FormatBool(unique.Bool) + ", set settings." + keyAppOwnership + ".generateUniqueAppIds (or " + keyScheduling +
		"'s) to " + strconv.FormatBool(unique.Bool) + " and restart the webhook"
}
