package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/policy/nsfilter"
)

// Scheduling is the namespace rule of the policy's scheduling setting:
// a Pod created in a namespace it processes is sent to SchedulerName
// whatever spec.schedulerName it asked for (the scheduler's own Pods,
// label app=yunikorn, aside), so what runs there and the templates that
// will make Pods there are audited too.
type Scheduling struct {
	SchedulerName string
	// Process and Bypass are processNamespaces and bypassNamespaces.
	Process, Bypass []*regexp.Regexp
	// NamespaceAnnotations honours the namespace's enableYuniKorn
	// annotation (the setting's namespaceAnnotations, default true).
	NamespaceAnnotations bool
}

// ParseScheduling reads the scheduling setting of the policy's settings
// (a JSON object): nil when it is absent or null (off). The settings are
// expected to have passed the policy's validate_settings; what does not
// parse is still an error naming the field.
func ParseScheduling(settings json.RawMessage) (*Scheduling, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(settings, &top); err != nil {
		return nil, fmt.Errorf("settings: must be a JSON object: %w", err)
	}
	raw, ok := top["scheduling"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("settings.scheduling: must be an object (or null: off)")
	}
	sc := &Scheduling{SchedulerName: "yunikorn", NamespaceAnnotations: true,
		Bypass: []*regexp.Regexp{regexp.MustCompile(nsfilter.DefaultBypass)}}
	if v, ok := obj["schedulerName"]; ok {
		if err := json.Unmarshal(v, &sc.SchedulerName); err != nil || sc.SchedulerName == "" {
			return nil, fmt.Errorf("settings.scheduling.schedulerName: must be a scheduler's name, got %s", v)
		}
	}
	if v, ok := obj["namespaceAnnotations"]; ok {
		if err := json.Unmarshal(v, &sc.NamespaceAnnotations); err != nil {
			return nil, fmt.Errorf("settings.scheduling.namespaceAnnotations: must be true or false, got %s", v)
		}
	}
	for _, l := range []struct {
		key string
		out *[]*regexp.Regexp
	}{{"processNamespaces", &sc.Process}, {"bypassNamespaces", &sc.Bypass}} {
		v, ok := obj[l.key]
		if !ok {
			continue
		}
		list, err := patterns(v)
		if err != nil {
			return nil, fmt.Errorf("settings.scheduling.%s: %w", l.key, err)
		}
		*l.out = (*l.out)[:0]
		for i, p := range list {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("settings.scheduling.%s[%d]: invalid regular expression %q: %w", l.key, i, p, err)
			}
			*l.out = append(*l.out, re)
		}
	}
	return sc, nil
}

// patterns reads a list of regular expressions as the policy takes it:
// an array of strings, or one comma-separated string.
func patterns(v json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(v, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("must be a list of regular expressions (an array of strings or one comma-separated string), got %s", v)
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	pieces, problem := nsfilter.SplitPatterns(s)
	if problem != "" {
		return nil, fmt.Errorf("%s", problem)
	}
	for i := range pieces {
		pieces[i] = strings.TrimSpace(pieces[i])
	}
	return pieces, nil
}

// schedules tells whether YuniKorn schedules (or, for a template, will
// schedule) a Pod of namespace ns with this schedulerName and app label:
// its scheduler name is --scheduler-name, or the scheduling setting sends
// the Pods of ns to YuniKorn.
func (s *scan) schedules(ctx context.Context, ns, schedulerName, appLabel string) bool {
	if schedulerName == s.opts.SchedulerName {
		return true
	}
	return !nsfilter.IsSchedulerPod(appLabel) && s.processedNS(ctx, ns)
}

// processedNS tells whether the scheduling setting processes namespace
// ns (false when it is off), reading the namespace's enableYuniKorn
// annotation once.
func (s *scan) processedNS(ctx context.Context, ns string) bool {
	sc := s.opts.Scheduling
	if sc == nil {
		return false
	}
	if ns == "" {
		ns = "default"
	}
	if v, ok := s.processed[ns]; ok {
		return v
	}
	enable := nsfilter.Unset
	if sc.NamespaceAnnotations {
		n, err := s.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			v, present := n.Annotations[nsfilter.AnnotationEnableYuniKorn]
			enable = nsfilter.Flag(present, v)
		} else {
			// As the policy: a namespace that cannot be read leaves the
			// decision to the lists.
			s.opts.Logger.Warn("audit: namespace not read; its "+nsfilter.AnnotationEnableYuniKorn+" annotation is not honoured", "namespace", ns, "error", err)
		}
	}
	v := nsfilter.Processed(sc.Process, sc.Bypass, enable, ns)
	s.processed[ns] = v
	return v
}
