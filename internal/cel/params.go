package cel

import (
	"encoding/json"
	"fmt"
)

// The Helm chart's form (modes cel and hybrid): one set of policies that
// reads every setting from a ConfigMap parameter at evaluation time, so
// that the chart ships the CEL text this package writes, unchanged, and
// templates only the ConfigMap and the bindings. ParamData writes that
// ConfigMap's data for a set of settings; ChartPolicies the policies.

// ParamSettings are settings that read every value from the parameter.
func ParamSettings() *Settings { return &Settings{params: true} }

// paramKey is the CEL expression of the parameter's value at key, def
// when it has none.
func paramKey(key, def string) string {
	return "params.?data[?" + Quote(key) + "].orValue(" + Quote(def) + ")"
}

// paramList is the CEL list of the patterns at key: written one per line
// (ParamData), the empty string for none.
func paramList(key string) string {
	return "(" + paramKey(key, "") + " == '' ? [] : " + paramKey(key, "") + ".split('\\n'))"
}

// paramMatch is the CEL expression of whether a pattern of the list at key
// matches x (the policy's unanchored search).
func paramMatch(x, key string) string {
	return paramList(key) + ".exists(p, " + x + ".matches(p))"
}

// paramTrue is the CEL expression of whether the flag at key is on.
func paramTrue(key string, def bool) string {
	d := "false"
	if def {
		d = "true"
	}
	return "(" + paramKey(key, d) + " == 'true')"
}

// paramKeep is keepExpr read from the parameter.
func paramKeep(g string) string {
	return "(" + paramKey("recordedGroups", "all") + " != 'omit' && (" + paramList("recordedGroupsInclude") + ".size() == 0 || " +
		paramMatch(g, "recordedGroupsInclude") + ") && !" + paramMatch(g, "recordedGroupsExclude") + ")"
}

// ParamKind is the parameter's kind: a ConfigMap (core v1).
var ParamKind = map[string]string{"apiVersion": "v1", "kind": "ConfigMap"}

// ChartTarget is one shape of object in the chart's form: the specs of its
// mutating policy (none for Bindings) and of its validating policy.
type ChartTarget struct {
	Name       string `json:"name"`
	Mutating   any    `json:"mutating,omitempty"`
	Validating any    `json:"validating"`
}

// ChartTwin is the twin's match condition in the chart's form: the
// template, the placeholders, and the format of one pattern of each list
// (FillTwinCondition).
type ChartTwin struct {
	Name              string `json:"name"`
	Template          string `json:"template"`
	UsersPlaceholder  string `json:"usersPlaceholder"`
	GroupsPlaceholder string `json:"groupsPlaceholder"`
	UserMatch         string `json:"userMatch"`
	GroupMatch        string `json:"groupMatch"`
}

// ChartFile is what ChartPolicies writes: the policies, and the settings
// whose rules need the webhook (ErrNeedsWebhook), with why.
type ChartFile struct {
	Comment     string            `json:"comment"`
	ParamKind   map[string]string `json:"paramKind"`
	ParamKeys   []string          `json:"paramKeys"`
	ContextKeys map[string]string `json:"contextKeys"`
	// StandaloneKeys are the context keys mode hybrid refuses too: only
	// the webhook alone takes them.
	StandaloneKeys []string `json:"standaloneKeys"`
	// Twin is the validating twin's match condition for Pods and
	// workloads (TwinCondition), for the chart to fill from its values.
	Twin ChartTwin `json:"twin"`
	// Defaults is the parameter's data for the policy's defaults: what a
	// setting the values leave out stands for.
	Defaults map[string]string `json:"defaults"`
	Targets  []ChartTarget     `json:"targets"`
}

// ParamKeys are the keys of the parameter's data, as ParamData writes them.
var ParamKeys = []string{"bypassAuth", "externalGroups", "externalUsers", "recordedGroups",
	"recordedGroupsExclude", "recordedGroupsInclude", "systemUsers", "trustControllers", "userLabelKey"}

// ChartPolicies writes the chart's form as indented JSON: the specs of the
// policies, each reading its settings from a ConfigMap parameter, and
// failing closed (the bindings must deny when it is missing).
func ChartPolicies() ([]byte, error) {
	defaults, err := ParseSettings([]byte(`{}`))
	if err != nil {
		return nil, err
	}
	s := ParamSettings()
	f := ChartFile{
		Defaults: ParamData(defaults),
		Comment: "Generated from internal/cel by `go test ./internal/cel -run TestChartFile -update` (make generate); do not edit. " +
			"The policies of modes cel and hybrid; the settings are read from the ConfigMap parameter (cel.ParamData).",
		ParamKind:      ParamKind,
		ParamKeys:      ParamKeys,
		ContextKeys:    contextKeys,
		StandaloneKeys: standaloneKeys,
		Twin: ChartTwin{Name: TwinConditionName, Template: TwinConditionTemplate(),
			UserMatch: TwinUserMatch(), GroupMatch: TwinGroupMatch,
			UsersPlaceholder: TwinUsersPlaceholder, GroupsPlaceholder: TwinGroupsPlaceholder},
	}
	for _, t := range targets {
		ct := ChartTarget{Name: t.name}
		if !t.binding {
			m := mutatingSpec(s, t)
			m.ParamKind = ParamKind
			ct.Mutating = m
		}
		v := validatingSpec(s, t)
		v.ParamKind = ParamKind
		ct.Validating = v
		f.Targets = append(f.Targets, ct)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the chart's policies: %w", err)
	}
	return append(b, '\n'), nil
}

// ParamData is the parameter's data for settings s (parsed by
// ParseSettings): each list one pattern per line, an empty pattern (which
// matches everything) written as (?:), a line break inside a pattern as
// \n, which Go's regexp reads the same.
func ParamData(s *Settings) map[string]string {
	list := func(ps []string) string {
		out := ""
		for i, p := range ps {
			if p == "" {
				p = "(?:)"
			}
			if i > 0 {
				out += "\n"
			}
			for _, r := range p {
				if r == '\n' {
					out += `\n`
				} else {
					out += string(r)
				}
			}
		}
		return out
	}
	d := map[string]string{
		"bypassAuth":       fmt.Sprint(s.BypassAuth),
		"trustControllers": fmt.Sprint(s.TrustControllers),
		"userLabelKey":     s.UserLabelKey,
		"systemUsers":      list(s.SystemUsers),
		"externalUsers":    list(s.ExternalUsers),
		"externalGroups":   list(s.ExternalGroups),
		"recordedGroups":   "all",
	}
	if g := s.RecordedGroups; g != nil {
		d["recordedGroups"] = "filter"
		if g.Omit {
			d["recordedGroups"] = "omit"
		}
		d["recordedGroupsInclude"] = list(g.Include)
		d["recordedGroupsExclude"] = list(g.Exclude)
	}
	return d
}
