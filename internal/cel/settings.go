package cel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/policy/nsfilter"
)

// Settings are the policy settings that the in-apiserver mode expresses:
// the identity rules without context (docs/BEHAVIOUR.md §3, §4.1-§4.3,
// §4.9). They are read from a settings object that the policy module's
// validate_settings has already accepted, so types are not checked twice.
type Settings struct {
	BypassAuth       bool
	TrustControllers bool
	SystemUsers      []string
	ExternalUsers    []string
	ExternalGroups   []string
	SchedulerUsers   []string
	UserLabelKey     string
	ValidateOnly     bool
	// RecordedGroups shapes the groups the annotation records; nil: all.
	RecordedGroups *GroupShaping
	// params: every value above is read from the policies' ConfigMap
	// parameter when they run (ParamSettings), not written into them.
	params bool
}

// GroupShaping is settings.recordedGroups.
type GroupShaping struct {
	Omit             bool
	Include, Exclude []string
}

// The policy's defaults (policy/settings.go, policy/placeholder.go).
var (
	defaultSystemUsers    = []string{"^system:serviceaccount:kube-system:", "^system:kube-controller-manager$"}
	defaultSchedulerUsers = []string{"^system:serviceaccount:yunikorn:yunikorn-admin$"}
)

const defaultUserLabelKey = "yunikorn.apache.org/username"

// contextKeys are the settings whose rules read objects from the cluster
// (or review RBAC, or edit what the scheduler reads): CEL in the API server
// cannot, so they need the webhook.
var contextKeys = map[string]string{
	"trustRBAC":            "asks SubjectAccessReviews",
	"queueCheck":           "reads YuniKorn's configuration",
	"configValidation":     "validates YuniKorn's ConfigMaps as the scheduler would",
	"workloads":            "guards custom kinds and reads owners for the owner proof",
	"trustPodTokens":       "reads the Pod a token is bound to",
	"applicationOwnership": "reads the Pods of YuniKorn applications",
	"scheduling":           "reads YuniKorn's configuration and namespaces",
	"followYuniKornConfig": "reads the access control from YuniKorn's ConfigMaps, live",
	// Not context: a rule the generated policies do not express.
	"adopters": "lets adopters record the owner of an object that records none, which the CEL rules refuse on UPDATE",
}

// standaloneKeys are the context keys mode hybrid cannot use either: with
// them the webhook admits a supplied annotation (an operator's copy, an
// adoption, one trusted by RBAC or by the followed yunikorn-configs) that
// the CEL policies, evaluated after it, refuse. Only the webhook alone
// (modes standalone and kubewarden) takes them.
var standaloneKeys = []string{"adopters", "followYuniKornConfig", "trustPodTokens", "trustRBAC", "workloads"}

// ErrNeedsWebhook lists settings the in-apiserver mode cannot express.
type ErrNeedsWebhook struct{ Keys []string }

// Error names the mode that takes every key: hybrid, unless one of them is
// a key only the webhook alone takes.
func (e *ErrNeedsWebhook) Error() string {
	parts := make([]string, len(e.Keys))
	var alone []string
	for i, k := range e.Keys {
		parts[i] = "settings." + k + " (" + contextKeys[k] + ")"
		if slices.Contains(standaloneKeys, k) {
			alone = append(alone, "settings."+k)
		}
	}
	msg := "the in-apiserver (CEL) mode cannot express " + strings.Join(parts, ", ") + ": these rules need the webhook; "
	if len(alone) > 0 {
		return msg + "use the webhook alone (the chart's mode standalone, or kubewarden): mode hybrid cannot use " +
			strings.Join(alone, ", ") + " either, since the webhook would admit a supplied annotation the CEL policies refuse"
	}
	return msg + "use mode hybrid (CEL for the core rules, the webhook for these) or standalone"
}

// Needs says what an API server of version kube needs to load what cel
// prints (static: the staticManifestsDir form), or "" when nothing: the
// feature gates off by default there. kube must be one MAPVersion accepts.
func Needs(kube string, static bool) string {
	_, minor, _ := strings.Cut(strings.TrimPrefix(kube, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	n, _ := strconv.Atoi(minor)
	switch {
	case static && n == 36:
		return "Kubernetes 1.36 loads static admission manifests only with the ManifestBasedAdmissionControlConfig feature gate " +
			"(kube-apiserver --feature-gates=ManifestBasedAdmissionControlConfig=true), beta and on by default from 1.37"
	case n == 34 || n == 35:
		return "Kubernetes 1." + minor + " serves MutatingAdmissionPolicy v1beta1 only with kube-apiserver " +
			"--feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true"
	}
	return ""
}

// ParseSettings reads the core settings from a settings object the policy
// accepted, and refuses settings that turn on a rule that needs context.
func ParseSettings(raw []byte) (*Settings, error) {
	s := &Settings{
		TrustControllers: true,
		SystemUsers:      defaultSystemUsers,
		SchedulerUsers:   defaultSchedulerUsers,
		UserLabelKey:     defaultUserLabelKey,
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	var need []string
	for k, v := range m {
		if _, ctx := contextKeys[k]; ctx {
			if on(k, v) {
				need = append(need, k)
			}
			continue
		}
		var err error
		switch k {
		case "bypassAuth":
			err = json.Unmarshal(v, &s.BypassAuth)
		case "trustControllers":
			err = json.Unmarshal(v, &s.TrustControllers)
		case "validateOnly":
			err = json.Unmarshal(v, &s.ValidateOnly)
		case "userLabelKey":
			err = json.Unmarshal(v, &s.UserLabelKey)
		case "systemUsers":
			s.SystemUsers, err = parseList(k, v)
		case "externalUsers":
			s.ExternalUsers, err = parseList(k, v)
		case "externalGroups":
			s.ExternalGroups, err = parseList(k, v)
		case "schedulerUsers":
			s.SchedulerUsers, err = parseList(k, v)
		case "recordedGroups":
			s.RecordedGroups, err = parseShaping(v)
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("settings.%s: %w", k, err)
		}
	}
	if len(need) > 0 {
		sort.Strings(need)
		return nil, &ErrNeedsWebhook{Keys: need}
	}
	for _, list := range [][]string{s.SystemUsers, s.ExternalUsers, s.ExternalGroups, s.SchedulerUsers} {
		for _, p := range list {
			// The policy compiled them with Go's regexp, which CEL's
			// matches() is: this only guards against a module that
			// accepted what Go cannot compile.
			if _, err := regexp.Compile(p); err != nil {
				return nil, fmt.Errorf("settings: pattern %q: %w", p, err)
			}
		}
	}
	return s, nil
}

// on reports whether a context setting's value turns its rule on: the
// policy's "off" spellings are absent, null, false, "off", an empty list
// and an object whose mode is "off".
func on(key string, v json.RawMessage) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return true
	}
	switch t := x.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != "off"
	case []any:
		return len(t) > 0
	case map[string]any:
		if key == "trustRBAC" || key == "scheduling" || key == "followYuniKornConfig" {
			return true
		}
		mode, ok := t["mode"].(string)
		// An object without a mode takes the rule's default, which is on.
		return !ok || mode != "off"
	}
	return true
}

// parseList reads a list of regular expressions as the policy does: an
// array of strings kept as written, or one comma-separated string split
// where the policy splits it (between patterns, not inside brackets) and
// trimmed; the string "" (or only blanks) is the empty list.
func parseList(key string, v json.RawMessage) ([]string, error) {
	var arr []string
	if err := json.Unmarshal(v, &arr); err == nil {
		if arr == nil {
			arr = []string{}
		}
		return arr, nil
	}
	var list string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, fmt.Errorf("must be an array of strings or one comma-separated string")
	}
	out := []string{}
	if strings.TrimSpace(list) == "" {
		return out, nil
	}
	pieces, ok := splitPatterns(list)
	if !ok {
		return nil, fmt.Errorf("cannot split %q into patterns", list)
	}
	for _, p := range pieces {
		out = append(out, strings.TrimSpace(p))
	}
	return out, nil
}

// splitPatterns splits at the commas between patterns as the policy does
// (nsfilter.SplitPatterns, the one implementation).
func splitPatterns(list string) ([]string, bool) {
	pieces, problem := nsfilter.SplitPatterns(list)
	return pieces, problem == ""
}

func parseShaping(v json.RawMessage) (*GroupShaping, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	g := &GroupShaping{}
	for k, f := range m {
		var err error
		switch k {
		case "omit":
			err = json.Unmarshal(f, &g.Omit)
		case "include":
			g.Include, err = parseList("recordedGroups.include", f)
		case "exclude":
			g.Exclude, err = parseList("recordedGroups.exclude", f)
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return g, nil
}
