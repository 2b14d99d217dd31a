package ykconfig

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/policy/acconf"
)

// YuniKorn's keys (k8shim v1.9 pkg/admission/conf/am_conf.go and
// pkg/conf/schedulerconf.go).
const (
	KeyBypassAuth          = acconf.KeyBypassAuth
	KeyTrustControllers    = acconf.KeyTrustControllers
	KeySystemUsers         = acconf.KeySystemUsers
	KeyExternalUsers       = acconf.KeyExternalUsers
	KeyExternalGroups      = acconf.KeyExternalGroups
	KeyProcessNamespaces   = acconf.KeyProcessNamespaces
	KeyBypassNamespaces    = acconf.KeyBypassNamespaces
	KeyLabelNamespaces     = acconf.KeyLabelNamespaces
	KeyNoLabelNamespaces   = acconf.KeyNoLabelNamespaces
	KeyGenerateUniqueAppID = acconf.KeyGenerateUniqueAppID
	KeyAMServiceName       = "admissionController.webHook.amServiceName"
	KeySchedulerAddress    = "admissionController.webHook.schedulerServiceAddress"
	KeyPolicyGroup         = "service.policyGroup"
	KeyHotRefresh          = "service.enableConfigHotRefresh"
)

// CheckedAgainst says which YuniKorn the conversion reads keys, defaults
// and values as, and how far that was checked, for migrate's report: k8shim
// v1.9.0's own configuration code runs in the real-cluster tests; the
// k8shim main line after it, which 1.10 comes from, has the same
// pkg/admission/conf (read, not run).
const CheckedAgainst = "read as YuniKorn 1.9's admission controller reads it (tested against k8shim v1.9.0); " +
	"YuniKorn 1.10's reads the same keys with the same defaults and parsing (read, not tested)"

// YuniKorn 1.9's defaults of the keys that are mapped.
const (
	ykDefaultSystemUsers      = acconf.DefaultSystemUsers
	ykDefaultPolicyGroup      = "queues"
	ykDefaultBypassNamespaces = acconf.DefaultBypassNamespaces
)

// policyDefaultSystemUsers is the policy's own default (docs/BEHAVIOUR.md §3).
var policyDefaultSystemUsers = acconf.PolicyDefaultSystemUsers

// Status says what became of a key (the statuses of the shared mapping).
type Status = acconf.Status

// The statuses of a Note (see acconf).
const (
	Mapped     = acconf.Mapped
	Differs    = acconf.Differs
	Invalid    = acconf.Invalid
	NotMapped  = acconf.NotMapped
	Ignored    = acconf.Ignored
	Warning    = acconf.Warning
	HandedOver = acconf.HandedOver
)

// Note is one line of the report.
type Note = acconf.Note

// Setting is one policy setting of the output. Value is a bool, a string,
// a []string or, for an object, a []Setting.
type Setting struct {
	Key   string
	Value any
	// From is the YuniKorn key, or what else, the value comes from.
	From string
}

// Modes of queueCheck and applicationOwnership.
var modes = []string{"enforce", "warn", "off"}

// Options choose what Convert adds beyond the access control keys.
type Options struct {
	// QueueCheck, when set to a mode, adds queueCheck with that mode, the
	// ConfigMaps' namespace and service.policyGroup. Default: none.
	QueueCheck string
	// ApplicationOwnership, when set to a mode, adds applicationOwnership
	// with that mode and admissionController.filtering.generateUniqueAppId.
	// Default: none.
	ApplicationOwnership string
	// Namespace is YuniKorn's namespace for queueCheck.namespace when the
	// ConfigMaps do not say. Default: theirs, else the policy's default.
	Namespace string
	// Explicit writes every access control setting (and every key of
	// scheduling), with YuniKorn's default where the ConfigMaps do not set
	// it, so that the output also behaves as YuniKorn does where the two
	// defaults differ. Default: only the keys that are set.
	Explicit bool
	// NoScheduling leaves the scheduling setting out: YuniKorn's admission
	// controller stays for its schedulerName, application ID and
	// preemption jobs. Default: scheduling is written, carrying the
	// admissionController.filtering keys, since the policy replaces the
	// admission controller.
	NoScheduling bool
	// UniqueAppIDs writes generateUniqueAppIds: true (in scheduling, and
	// in applicationOwnership when it is written) whatever the ConfigMaps
	// say: each Pod without an application ID then gets an application of
	// its own, charged to its own user. Default: YuniKorn's value.
	UniqueAppIDs bool
	// Follow, when set, is the namespace the policy follows YuniKorn's
	// ConfigMaps in (followYuniKornConfig): the access control and
	// filtering keys are mapped and reported as they will be followed,
	// but not copied into the settings; followYuniKornConfig is written
	// instead. Default: copied.
	Follow string
}

// Result is a conversion: the settings in the policy's order, and the
// report in YuniKorn's order of keys.
type Result struct {
	Settings []Setting
	Notes    []Note
	// SharedAutogen: the ConfigMaps leave generateUniqueAppId false, so
	// the Pods without an application ID of a namespace share one
	// generated application (yunikorn-NAMESPACE-autogen).
	SharedAutogen bool
}

// Convert maps YuniKorn's admission controller configuration to policy
// settings.
func Convert(src Source, opts Options) (*Result, error) {
	for _, m := range []struct{ flag, mode string }{{"queue check", opts.QueueCheck}, {"application ownership", opts.ApplicationOwnership}} {
		if m.mode != "" && !contains(modes, m.mode) {
			return nil, fmt.Errorf("%s mode %q: want one of %s", m.flag, m.mode, strings.Join(modes, ", "))
		}
	}
	c := &converter{keys: flatten(src), used: map[string]bool{}, opts: opts}
	c.m = c.mapper()
	c.accessControl()
	c.queueCheck(src)
	c.appOwnership()
	c.scheduling()
	c.autogen()
	c.notMapped()
	c.rest()
	c.follow()
	return &c.res, nil
}

type converter struct {
	m    *acconf.Mapper
	keys map[string]entry
	used map[string]bool
	opts Options
	res  Result
}

func (c *converter) note(key string, s Status, format string, args ...any) {
	c.res.Notes = append(c.res.Notes, Note{Key: key, Status: s, Text: fmt.Sprintf(format, args...)})
}

func (c *converter) set(key string, v any, from string) {
	c.res.Settings = append(c.res.Settings, Setting{Key: key, Value: v, From: from})
}

// lookup returns a key's value, marking it reported.
func (c *converter) lookup(key string) (entry, bool) {
	c.used[key] = true
	e, ok := c.keys[key]
	return e, ok
}

func (c *converter) accessControl() {
	m := c.m
	c.field(m.BypassAuth())
	c.field(m.TrustControllers())
	if f := c.field(m.SystemUsers()); !f.Set {
		c.note(KeySystemUsers, Differs, "not set: YuniKorn 1.9 trusts %s; this policy's default adds %s, the identity of every "+
			"controller when kube-controller-manager runs without --use-service-account-credentials, whose Pods from "+
			"annotated templates YuniKorn refuses. Pass --explicit to write YuniKorn's default instead",
			ykDefaultSystemUsers, policyDefaultSystemUsers[1])
	}
	c.field(m.External(false))
	c.field(m.External(true))
}

// mapper is the shared mapping (policy/acconf) over the flattened keys; its
// notes go to the report as each field is written.
func (c *converter) mapper() *acconf.Mapper {
	return &acconf.Mapper{Look: func(key string) acconf.Entry {
		e, ok := c.lookup(key)
		return acconf.Entry{Value: e.value, Set: ok, From: fromNote(e)}
	}}
}

// field writes what a key maps to (with YuniKorn's default under
// --explicit when it is not set) and moves the mapping's notes into the
// report.
func (c *converter) field(f acconf.Field) acconf.Field {
	c.res.Notes = append(c.res.Notes, c.m.Notes...)
	c.m.Notes = c.m.Notes[:0]
	if f.Set || f.HandedOver || c.opts.Explicit {
		from := f.Key
		switch {
		case f.HandedOver:
			// bypassAuth "true" is YuniKorn's admission controller
			// standing aside: written false, as the policy runs.
			from = f.Key + " \"true\", not carried over"
		case !f.Set:
			from = "YuniKorn's default"
		}
		if f.List {
			c.set(f.Setting, f.Patterns, from)
		} else {
			c.set(f.Setting, f.Bool, from)
		}
	}
	return f
}

func fromNote(e entry) string {
	switch {
	case e.over != nil:
		return " (" + e.from + ", over " + DefaultsConfigMapName + "' " + strconv.Quote(*e.over) + ")"
	case e.from == ConfigMapName:
		return ""
	}
	return " (from " + e.from + ")"
}

func (c *converter) queueCheck(src Source) {
	e, hasGroup := c.lookup(KeyPolicyGroup)
	if c.opts.QueueCheck == "" {
		if hasGroup {
			c.note(KeyPolicyGroup, NotMapped, "%q: the policy reads it only for queueCheck (--queue-check)", e.value)
		}
		return
	}
	obj := []Setting{{Key: "mode", Value: c.opts.QueueCheck, From: "--queue-check"}}
	ns, from := src.Namespace(), "the ConfigMaps' namespace"
	if ns == "" {
		ns, from = c.opts.Namespace, "--namespace"
	}
	if ns != "" {
		obj = append(obj, Setting{Key: "namespace", Value: ns, From: from})
		c.note("namespace", Mapped, "%q (%s) -> queueCheck.namespace", ns, from)
	} else {
		c.note("namespace", Differs, "the ConfigMaps name no namespace: queueCheck reads YuniKorn's ConfigMaps from its default, yunikorn")
	}
	if hasGroup {
		if strings.TrimSpace(e.value) == "" {
			// The shim takes "" as the group: the key ".yaml".
			c.note(KeyPolicyGroup, Invalid, "empty: YuniKorn reads the queue configuration from the key \".yaml\"; this policy "+
				"refuses an empty policyGroup and reads %s.yaml", ykDefaultPolicyGroup)
		} else {
			obj = append(obj, Setting{Key: "policyGroup", Value: e.value, From: KeyPolicyGroup})
			c.note(KeyPolicyGroup, Mapped, "%q -> queueCheck.policyGroup%s", e.value, fromNote(e))
		}
	}
	c.set("queueCheck", obj, "--queue-check")
}

func (c *converter) appOwnership() {
	e, ok := c.lookup(KeyGenerateUniqueAppID)
	unique := false
	if ok {
		v, err := strconv.ParseBool(e.value)
		if err != nil {
			c.note(KeyGenerateUniqueAppID, Invalid, "%q is not a boolean to YuniKorn 1.9: it logs an error and runs with false", e.value)
		} else {
			unique = v
		}
	}
	unique = unique || c.opts.UniqueAppIDs
	if c.opts.ApplicationOwnership == "" {
		if ok && c.opts.NoScheduling {
			c.note(KeyGenerateUniqueAppID, NotMapped, "%q: YuniKorn's admission controller generates the application IDs of "+
				"Pods without one, this policy generates none (keep YuniKorn's admission controller for it); "+
				"applicationOwnership.generateUniqueAppIds mirrors it (--application-ownership)", e.value)
		}
		return
	}
	if ok && c.opts.NoScheduling {
		c.note(KeyGenerateUniqueAppID, Mapped, "%q -> applicationOwnership.generateUniqueAppIds: %t; YuniKorn's admission "+
			"controller still generates the IDs (keep it for that)", e.value, unique)
	}
	from := KeyGenerateUniqueAppID
	if c.opts.UniqueAppIDs {
		from = "--unique-app-ids"
	}
	c.set("applicationOwnership", []Setting{
		{Key: "mode", Value: c.opts.ApplicationOwnership, From: "--application-ownership"},
		{Key: "generateUniqueAppIds", Value: unique, From: from},
	}, "--application-ownership")
}

// scheduling maps the admissionController.filtering keys into the
// scheduling setting (docs/BEHAVIOUR.md §3.10), read as YuniKorn reads them;
// the setting is written even when none is set (scheduling: {} is
// YuniKorn's defaults), unless NoScheduling.
func (c *converter) scheduling() {
	if c.opts.NoScheduling {
		return
	}
	top := c.res.Settings
	c.res.Settings = nil
	c.field(c.m.List(KeyProcessNamespaces, "scheduling.processNamespaces", ""))
	c.field(c.m.List(KeyBypassNamespaces, "scheduling.bypassNamespaces", ykDefaultBypassNamespaces))
	c.field(c.m.List(KeyLabelNamespaces, "scheduling.labelNamespaces", ""))
	c.field(c.m.List(KeyNoLabelNamespaces, "scheduling.noLabelNamespaces", ""))
	c.field(c.m.Bool(KeyGenerateUniqueAppID, "scheduling.generateUniqueAppIds", false))
	if c.opts.UniqueAppIDs {
		c.res.Settings = slices.DeleteFunc(c.res.Settings, func(s Setting) bool { return s.Key == "scheduling.generateUniqueAppIds" })
		c.set("scheduling.generateUniqueAppIds", true, "--unique-app-ids")
	}
	obj := c.res.Settings
	for i := range obj {
		obj[i].Key = strings.TrimPrefix(obj[i].Key, "scheduling.")
	}
	c.res.Settings = top
	c.set("scheduling", obj, "YuniKorn's admission controller (admissionController.filtering)")
	c.note("scheduling", Mapped, "the policy does the admission controller's other jobs on Pod CREATE (schedulerName, "+
		"application ID labels, allow-preemption, ignore-application) in the namespaces these keys and the namespaces' "+
		"annotations select; remove YuniKorn's admission controller once this webhook serves (two webhooks would both "+
		"write them). Pass --scheduling=false to leave it out and keep YuniKorn's admission controller for them")
}

// autogen warns when generateUniqueAppId is false, as YuniKorn runs it by
// default: the shim then puts every Pod without an application ID of a
// namespace into one application, yunikorn-NAMESPACE-autogen, which
// YuniKorn gives to the user of the Pod that made it (so later Pods of
// other users run as that user: placement, ACLs, quotas). The output
// carries the value as it is; the line says how to change it.
func (c *converter) autogen() {
	e, ok := c.lookup(KeyGenerateUniqueAppID)
	value := "not set (YuniKorn's default false)"
	if ok {
		v, err := strconv.ParseBool(e.value)
		if err == nil && v {
			return
		}
		value = strconv.Quote(e.value)
		if err != nil {
			value += " (invalid: YuniKorn runs with false)"
		}
	}
	c.res.SharedAutogen = true
	setting := "scheduling.generateUniqueAppIds"
	if c.opts.NoScheduling {
		setting = "applicationOwnership.generateUniqueAppIds (with --application-ownership)"
	}
	why := fmt.Sprintf("%s: every Pod without an application ID in a namespace joins one application, "+
		"yunikorn-NAMESPACE-autogen, which YuniKorn charges to the user of whichever Pod created it first (\"nobody\" when that "+
		"Pod had no user.info, e.g. created before anything recorded one), so the namespace's other users' Pods are placed, "+
		"checked and counted as that user's. What follows: this webhook records each submitter, yet YuniKorn keeps "+
		"charging their Pods to that application's user (per-user queues, limits and ACLs see no change), and with "+
		"applicationOwnership on, every other user of the namespace is refused. ", value)
	if c.opts.UniqueAppIDs {
		c.note(KeyGenerateUniqueAppID, Warning, "%sThe output sets %s: true (--unique-app-ids); set %s \"true\" in "+
			"yunikorn-configs in the same patch that hands user.info over, or YuniKorn's admission controller, while it runs, "+
			"labels Pods with the shared ID first. Afterwards audit --yunikorn URL lists the applications still charged to "+
			"another user (the old shared ones stay until their Pods are recreated)", why, setting, KeyGenerateUniqueAppID)
		return
	}
	c.note(KeyGenerateUniqueAppID, Warning, "%sTo do: set %s \"true\" (and %s: true in these settings: --unique-app-ids) "+
		"so that each such Pod is an application of its own, or give the workloads application IDs (label applicationId or "+
		"yunikorn.apache.org/app-id); afterwards audit --yunikorn URL lists the applications charged to another user than "+
		"their Pods record", why, KeyGenerateUniqueAppID, setting)
}

// Why the policy has nothing for the other keys of YuniKorn's admission
// controller, and what to do instead.
const (
	whySchedulerName = "YuniKorn's admission controller sets spec.schedulerName: yunikorn on the Pods of the namespaces it " +
		"processes; without the scheduling setting (--scheduling=false) this policy never changes the scheduler name: keep " +
		"YuniKorn's admission controller for it, with bypassAuth \"true\" (docs/MIGRATING.md" +
		"), or set schedulerName in the " +
		"workloads. Which namespaces this webhook covers is its MutatingWebhookConfiguration's namespaceSelector. YuniKorn " +
		"records user.info on Deployments, Jobs and the other workload kinds only in the namespaces it processes and labels " +
		"(or when they carry an application ID label), this policy on every guarded kind its webhook sees"
	whyLabels = "YuniKorn's admission controller labels the Pods of these namespaces with an application ID and queue, and " +
		"marks the others with yunikorn.apache.org/ignore-application; without the scheduling setting (--scheduling=false) " +
		"this policy writes no labels: keep YuniKorn's " +
		"admission controller for it, with bypassAuth \"true\""
	whyWebHook = "the Service of YuniKorn's admission controller and the scheduler address its validation of " +
		"yunikorn-configs calls; this webhook's Service and registration come from its chart or deploy/webhook, and it " +
		"does not validate yunikorn-configs (keep YuniKorn's admission controller for that)"
)

func (c *converter) notMapped() {
	for _, k := range []struct{ key, why string }{
		{KeyProcessNamespaces, whySchedulerName},
		{KeyBypassNamespaces, whySchedulerName},
		{KeyLabelNamespaces, whyLabels},
		{KeyNoLabelNamespaces, whyLabels},
		{KeyAMServiceName, whyWebHook},
		{KeySchedulerAddress, whyWebHook},
	} {
		if k.why != whyWebHook && !c.opts.NoScheduling {
			continue // mapped into scheduling
		}
		if e, ok := c.lookup(k.key); ok {
			c.note(k.key, NotMapped, "%q: %s", e.value, k.why)
		}
	}
	if e, ok := c.lookup(KeyHotRefresh); ok {
		if v, err := strconv.ParseBool(e.value); err == nil && !v {
			c.note(KeyHotRefresh, Differs, "%q: YuniKorn's admission controller keeps the configuration it started with; serve "+
				"reloads its settings file whenever it changes (once validate_settings accepts it)", e.value)
		} else {
			c.note(KeyHotRefresh, NotMapped, "%q: serve reloads its settings file whenever it changes (once validate_settings "+
				"accepts it)", e.value)
		}
	}
}

// rest reports the keys no step above looked at: YuniKorn's logging,
// unknown admissionController keys, and, in one line, the scheduler's.
func (c *converter) rest() {
	var others []string
	var keys []string
	for k := range c.keys {
		if !c.used[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "admissionController."):
			c.note(k, Ignored, "%q: YuniKorn 1.9's admission controller has no such key (keys are case-sensitive): "+
				"it ignores it too. A typo?", c.keys[k].value)
		case strings.HasPrefix(k, "log."):
			c.note(k, NotMapped, "%q: YuniKorn's logging; serve has --log-level and --log-format", c.keys[k].value)
		default:
			others = append(others, k)
		}
	}
	if len(others) > 0 {
		c.note("("+strconv.Itoa(len(others))+" other keys)", Ignored, "the scheduler's, not the admission controller's: %s",
			strings.Join(others, ", "))
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// followedKeys are the settings (and keys of scheduling) that
// followYuniKornConfig reads live, which Follow leaves out.
var followedKeys = map[string]bool{"bypassAuth": true, "trustControllers": true, "systemUsers": true, "externalUsers": true,
	"externalGroups": true, "processNamespaces": true, "bypassNamespaces": true, "labelNamespaces": true,
	"noLabelNamespaces": true, "generateUniqueAppIds": true}

// follow replaces the copied keys by followYuniKornConfig.
func (c *converter) follow() {
	if c.opts.Follow == "" {
		return
	}
	keep := []Setting{{Key: "followYuniKornConfig", Value: []Setting{{Key: "namespace", Value: c.opts.Follow, From: "--follow"}}, From: "--follow"}}
	for _, s := range c.res.Settings {
		if followedKeys[s.Key] {
			continue
		}
		if obj, ok := s.Value.([]Setting); ok && s.Key != "queueCheck" {
			var rest []Setting
			for _, o := range obj {
				if !followedKeys[o.Key] {
					rest = append(rest, o)
				}
			}
			s.Value = rest
		}
		keep = append(keep, s)
	}
	c.res.Settings = keep
	c.note("followYuniKornConfig", Mapped, "%q: the access control keys above (and admissionController.filtering, into "+
		"scheduling and applicationOwnership) are read live from %s and %s in that namespace and mapped as this report says, "+
		"not copied: edit the ConfigMap, not these settings; an edit applies at the next request (docs/BEHAVIOUR.md §3.11)",
		c.opts.Follow, DefaultsConfigMapName, ConfigMapName)
}
