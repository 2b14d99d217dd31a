package main

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/queues"
	"github.com/yunikorn-userinfo/userinfo/policy/shimconf"
)

// The configuration check (docs/BEHAVIOUR.md §3.9): an edit of YuniKorn's
// ConfigMaps that the scheduler's /ws/v1/validate-conf would refuse is
// refused (or warned about) with the scheduler's words, as YuniKorn's
// admission controller does (k8shim pkg/admission/admission_controller.go,
// validateConfigMap), without asking the scheduler.

// YuniKorn's two ConfigMaps, in the order the shim flattens them: the
// second one's keys replace the first one's.
const (
	configMapDefaults = shimconf.DefaultsName
	configMapConfigs  = shimconf.ConfigsName
	// keyPolicyGroup names the policy group whose <group>.yaml the
	// scheduler loads (k8shim pkg/conf, service.policyGroup).
	keyPolicyGroup     = "service.policyGroup"
	defaultPolicyGroup = "queues"
	// maxCheckedText bounds the configuration text checked: a few
	// thousand queues, which the module parses and validates within its
	// default 64 MiB and well within the evaluation's 2 s deadline
	// (BenchmarkConfigValidation, docs/BEHAVIOUR.md §3.9). Larger texts
	// are admitted unchecked, with a warning.
	maxCheckedText = 256 << 10
)

var configMapKind = kindRef{"", "ConfigMap"}

// configValidationSettings: the mode, and the namespace of YuniKorn's
// ConfigMaps (the scheduler's).
type configValidationSettings struct {
	mode      string
	namespace string
}

const configValidationKeys = "mode, namespace"

// parseConfigValidation reads configValidation: a mode string, or an
// object with mode (required) and namespace.
func parseConfigValidation(errs *settingsError, v gjson.Result) *configValidationSettings {
	const key = "settings." + keyConfigValidation
	c := configValidationSettings{mode: queueCheckOff, namespace: defaultQueueCheck.namespace}
	if v.Type == gjson.String {
		parseMode(errs, key, v, &c.mode)
		return &c
	}
	if !isObject(v) {
		errs.problems = append(errs.problems, key+": must be a mode (enforce, warn, off) or an object with "+configValidationKeys+", got "+describe(v))
		return nil
	}
	hasMode := false
	eachMember(errs, key, v, func(name, path string, f gjson.Result) {
		switch name {
		case "mode":
			hasMode = true
			parseMode(errs, path, f, &c.mode)
		case "namespace":
			switch {
			case f.Type != gjson.String:
				errs.problems = append(errs.problems, path+": must be a string, got "+describe(f))
			case strings.TrimSpace(str(f)) == "":
				errs.problems = append(errs.problems, path+": must not be empty")
			default:
				c.namespace = str(f)
			}
		default:
			errs.problems = append(errs.problems, key+": unknown key "+quote(name)+" (known keys: "+configValidationKeys+")")
		}
	})
	if !hasMode {
		errs.problems = append(errs.problems, key+".mode: missing (enforce, warn or off)")
	}
	return &c
}

// decideConfigMap is the configuration check of a ConfigMap CREATE or
// UPDATE. Any ConfigMap but YuniKorn's two in the configured namespace
// passes untouched, before anything else is read.
func decideConfigMap(r request, cv *configValidationSettings) decision {
	ns := str(r.namespace)
	if ns == "" {
		ns = "default" // as the admission controller reads an empty namespace
	}
	if ns != cv.namespace {
		return accept("pass-through: ConfigMap outside " + cv.namespace)
	}
	obj, err := objectField(r.object, "object")
	if err != nil {
		return rejectInput(err)
	}
	cm := gjson.Parse(obj)
	name := cm.Get("metadata.name")
	var other string
	switch {
	case name.Type != gjson.String:
		return accept("pass-through: ConfigMap not YuniKorn's")
	case str(name) == configMapDefaults:
		other = configMapConfigs
	case str(name) == configMapConfigs:
		other = configMapDefaults
	default:
		return accept("pass-through: ConfigMap not YuniKorn's")
	}
	for _, f := range [...]string{"data", "binaryData"} {
		if v := cm.Get(f); v.Exists() && v.Type != gjson.Null && !isObject(v) {
			return rejectInput(malformed("request.object."+f, "must be an object, got "+typeName(v)))
		}
	}
	stored, found, err := getObject("v1", "ConfigMap", cv.namespace, other, false)
	if err != nil {
		return configUnchecked(cv, "the merged configuration cannot be validated: "+err.Error())
	}
	maps := [2]gjson.Result{cm, {}}
	if found {
		maps[1] = gjson.Parse(stored)
	}
	if str(name) == configMapConfigs {
		maps[0], maps[1] = maps[1], maps[0]
	}
	flat := flatConfig{maps: maps}
	group, set, err := flat.get(keyPolicyGroup)
	if err != nil {
		return configUnchecked(cv, err.Error())
	}
	if !set {
		group = defaultPolicyGroup
	}
	key := group + ".yaml"
	text, _, err := flat.get(key)
	if err != nil {
		return configUnchecked(cv, err.Error())
	}
	rule := "configmap " + str(name) + ": " + key
	if len(text) > maxCheckedText {
		// Too large to parse within the module's memory and the
		// evaluation's deadline: admitted, as a configuration the
		// module cannot check (core may well accept it).
		why := key + " is " + strconv.Itoa(len(text)) + " bytes, more than the " + strconv.Itoa(maxCheckedText>>10) + " KiB configValidation checks"
		return configNotChecked(rule, why)
	}
	refused, unbuildable := queues.Check([]byte(text))
	var deep *queues.TooComplexError
	var unmodelled *queues.UncheckedError
	switch {
	case errors.As(refused, &deep) || errors.As(unbuildable, &deep):
		// core compiles the pattern and may well accept it: admitted.
		return configNotChecked(rule, key+" could not be checked: "+deep.Error())
	case errors.As(refused, &unmodelled):
		// YAML the module does not parse (yaml.v3 would trap it on a
		// syntax error there); core may well accept it: admitted.
		return configNotChecked(rule, key+" could not be checked: "+unmodelled.Error())
	case refused != nil:
		if cv.mode == queueCheckWarn {
			d := accept(rule + " refused by yunikorn-core, warned")
			d.warnings = append(d.warnings, "YuniKorn would refuse this configuration ("+key+"): "+refused.Error())
			return d
		}
		return reject(rule+" refused by yunikorn-core", codeForbidden, refused.Error())
	}
	d := accept(rule + " valid")
	if unbuildable != nil {
		// validate-conf accepts it; the scheduler then fails to apply it
		// and keeps its previous configuration.
		d.warnings = append(d.warnings, "YuniKorn accepts this configuration ("+key+") but will fail to apply it: "+unbuildable.Error())
		d.rule += ", not applicable"
	}
	return d
}

// configNotChecked admits an edit whose configuration the module cannot
// check (a pattern too deep to compile, a text too large), with the
// warning "configValidation: <why>".
func configNotChecked(rule, why string) decision {
	d := accept(rule + " not checked")
	d.warnings = append(d.warnings, "configValidation: "+why)
	logWarning("configuration check skipped", why)
	return d
}

// configUnchecked is the outcome of an edit whose merged configuration
// cannot be known: refused in enforce mode (fail closed: an unreadable
// ConfigMap is most often a missing RBAC grant, which would otherwise
// turn the check off unseen), admitted with a warning in warn mode.
func configUnchecked(cv *configValidationSettings, why string) decision {
	msg := "configValidation: " + why
	logWarning("configuration check failed", why)
	if cv.mode == queueCheckWarn {
		d := accept("configmap not checked, warned")
		d.warnings = append(d.warnings, msg)
		return d
	}
	return reject("configmap not checked, refused", codeForbidden, msg)
}

// flatConfig is YuniKorn's two ConfigMaps (either may be missing) as the
// shim flattens them (shimconf.Lookup), read key by key.
type flatConfig struct{ maps [2]gjson.Result }

// get returns the value of key, whether any map sets it, or why it
// cannot be known.
func (f flatConfig) get(key string) (string, bool, error) {
	var maps [2]shimconf.ConfigMap
	for i, cm := range f.maps {
		if cm.Exists() {
			maps[i] = jsonConfigMap{cm}
		}
	}
	v, err := shimconf.Lookup(maps[:], key)
	var tooLarge *shimconf.TooLargeError
	if errors.As(err, &tooLarge) {
		return "", false, errString("ConfigMap " + str(f.maps[tooLarge.Map].Get("metadata.name")) + ": " + err.Error() + ", which configValidation does not read")
	}
	return v.Text, v.Set, err
}

// jsonConfigMap is a ConfigMap as JSON, for shimconf.
type jsonConfigMap struct{ cm gjson.Result }

func (j jsonConfigMap) Data(key string) (string, bool) {
	v := j.cm.Get("data").Get(gjson.Escape(key))
	return v.String(), v.Exists() && v.Type != gjson.Null
}

// EachBinary gives the members of binaryData in the order the object
// lists them; a value is base64 in JSON.
func (j jsonConfigMap) EachBinary(f func(key string, value func() ([]byte, error)) bool) {
	j.cm.Get("binaryData").ForEach(func(k, v gjson.Result) bool {
		return f(str(k), func() ([]byte, error) {
			b, err := base64.StdEncoding.DecodeString(str(v))
			if err != nil {
				return nil, errString("not base64: " + err.Error())
			}
			return b, nil
		})
	})
}
