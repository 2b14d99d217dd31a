// Package ykconfig reads the configuration of YuniKorn's own admission
// controller (the admissionController.* keys of the yunikorn-configs and
// yunikorn-defaults ConfigMaps) the way the YuniKorn k8shim v1.9 reads it,
// and converts it into settings of the yunikorn-user-info policy, reporting
// for every key what was mapped, what could not be, and where the two
// behave differently.
//
// The k8shim's parsing is followed to the letter, since the point is to
// carry over what YuniKorn actually runs with: booleans through
// strconv.ParseBool, with the default (and an error in YuniKorn's log) for
// anything else; pattern lists split at every comma, pieces trimmed, empty
// pieces skipped, and the whole list replaced by its default when one piece
// does not compile (k8shim v1.9 pkg/admission/conf/am_conf.go).
package ykconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/policy/shimconf"
)

// The names of the two ConfigMaps the k8shim reads, in its namespace
// (k8shim v1.9 pkg/common/constants/constants.go).
const (
	ConfigMapName         = shimconf.ConfigsName
	DefaultsConfigMapName = shimconf.DefaultsName
)

// Source is what YuniKorn's admission controller reads: yunikorn-defaults,
// overridden key by key by yunikorn-configs. Either may be nil.
type Source struct {
	Defaults *corev1.ConfigMap
	Configs  *corev1.ConfigMap
}

// Namespace is the namespace the ConfigMaps are in ("" when neither says).
func (s Source) Namespace() string {
	for _, cm := range []*corev1.ConfigMap{s.Configs, s.Defaults} {
		if cm != nil && cm.Namespace != "" {
			return cm.Namespace
		}
	}
	return ""
}

// Describe names the ConfigMaps of s, for messages.
func (s Source) Describe() string {
	var names []string
	for _, cm := range []*corev1.ConfigMap{s.Defaults, s.Configs} {
		if cm == nil {
			continue
		}
		name := cm.Name
		if cm.Namespace != "" {
			name = cm.Namespace + "/" + name
		}
		names = append(names, name)
	}
	return strings.Join(names, " and ")
}

// Add files a ConfigMap as the defaults or the configs by its name. A
// ConfigMap without a name is taken as yunikorn-configs. source names the
// input in errors.
func (s *Source) Add(source string, cm *corev1.ConfigMap) error {
	if cm.Kind != "" && cm.Kind != "ConfigMap" {
		return fmt.Errorf("%s: a %s, not a ConfigMap", source, cm.Kind)
	}
	var slot **corev1.ConfigMap
	switch cm.Name {
	case DefaultsConfigMapName:
		slot = &s.Defaults
	case ConfigMapName, "":
		slot = &s.Configs
		if cm.Name == "" {
			cm.Name = ConfigMapName
		}
	default:
		return fmt.Errorf("%s: ConfigMap %q is neither %s nor %s, the two YuniKorn reads", source, cm.Name, ConfigMapName, DefaultsConfigMapName)
	}
	if *slot != nil {
		return fmt.Errorf("%s: ConfigMap %s given twice", source, cm.Name)
	}
	if other := s.Namespace(); other != "" && cm.Namespace != "" && other != cm.Namespace {
		return fmt.Errorf("%s: ConfigMap %s is in namespace %q, the other in %q: YuniKorn reads both from its own namespace", source, cm.Name, cm.Namespace, other)
	}
	*slot = cm
	return nil
}

// ReadCluster reads yunikorn-defaults and yunikorn-configs from namespace
// through the API server, as YuniKorn does: either may be absent (missing
// names those that are).
func ReadCluster(ctx context.Context, cs kubernetes.Interface, namespace string) (src Source, missing []string, err error) {
	for _, name := range []string{DefaultsConfigMapName, ConfigMapName} {
		cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			missing = append(missing, name)
			continue
		}
		if err != nil {
			return src, missing, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, name, err)
		}
		cm.Kind = "ConfigMap"
		// Filed by the name asked for, as the shim reads them.
		if name == ConfigMapName {
			src.Configs = cm
		} else {
			src.Defaults = cm
		}
	}
	return src, missing, nil
}

// ReadConfigMaps decodes the ConfigMaps of a YAML or JSON document: one
// ConfigMap, several YAML documents, or a List (as kubectl get -o yaml
// prints two).
func ReadConfigMaps(source string, data []byte) ([]*corev1.ConfigMap, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*corev1.ConfigMap
	for i := 0; ; i++ {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: document %d: %w", source, i+1, err)
		}
		if raw == nil {
			continue // an empty document
		}
		if kind, _ := raw["kind"].(string); kind == "List" || strings.HasSuffix(kind, "List") {
			items, _ := raw["items"].([]any)
			for j, item := range items {
				cm, err := decodeConfigMap(item)
				if err != nil {
					return nil, fmt.Errorf("read %s: document %d, item %d: %w", source, i+1, j, err)
				}
				out = append(out, cm)
			}
			continue
		}
		cm, err := decodeConfigMap(raw)
		if err != nil {
			return nil, fmt.Errorf("read %s: document %d: %w", source, i+1, err)
		}
		out = append(out, cm)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read %s: no ConfigMap in it", source)
	}
	return out, nil
}

func decodeConfigMap(v any) (*corev1.ConfigMap, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object")
	}
	if kind, _ := m["kind"].(string); kind != "" && kind != "ConfigMap" {
		return nil, fmt.Errorf("a %s, not a ConfigMap", kind)
	}
	if _, ok := m["data"]; !ok {
		if _, ok := m["binaryData"]; !ok {
			if _, ok := m["metadata"]; !ok {
				return nil, errors.New("not a ConfigMap: no data, binaryData or metadata")
			}
		}
	}
	// Values must be strings, as the API server requires: YuniKorn's
	// booleans are the strings "true" and "false", and a YAML true here
	// is a mistake the API server would refuse.
	if data, ok := m["data"].(map[string]any); ok {
		for k, val := range data {
			if _, ok := val.(string); !ok {
				return nil, fmt.Errorf("data.%s: must be a string (quote it: %q), got %T", k, fmt.Sprint(val), val)
			}
		}
	}
	j, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(j, cm); err != nil {
		return nil, fmt.Errorf("decode ConfigMap: %w", err)
	}
	return cm, nil
}

// entry is one flattened key: its value and the ConfigMap it came from.
type entry struct {
	value string
	from  string
	// over is the value of yunikorn-defaults that this one replaces, if
	// any.
	over *string
	// err says why a compressed value was not read.
	err error
}

// flatten merges the ConfigMaps as the k8shim's FlattenConfigMaps does,
// key by key through shimconf.Lookup, the rules the policy reads them
// by: every key either ConfigMap sets, with the value that wins.
func flatten(s Source) map[string]entry {
	maps := s.maps()
	keys := map[string]bool{}
	for _, cm := range []*corev1.ConfigMap{s.Defaults, s.Configs} {
		if cm == nil {
			continue
		}
		for k := range cm.Data {
			keys[k] = true
		}
		for k := range cm.BinaryData {
			key, gz := shimconf.BinaryKey(k)
			keys[key] = true
			if gz {
				keys[""] = true // where a value that does not inflate goes
			}
		}
	}
	out := map[string]entry{}
	for key := range keys {
		v, err := shimconf.Lookup(maps, key)
		if err == nil && !v.Set {
			continue
		}
		e := s.entry(v, err)
		if err == nil && v.Map == 1 {
			if d, _ := shimconf.Lookup(maps[:1], key); d.Set {
				e.over = &d.Text
			}
		}
		out[key] = e
	}
	return out
}

// maps is s for shimconf.Lookup: defaults, then configs.
func (s Source) maps() []shimconf.ConfigMap {
	maps := make([]shimconf.ConfigMap, 2)
	for i, cm := range []*corev1.ConfigMap{s.Defaults, s.Configs} {
		if cm != nil {
			maps[i] = configMap{cm}
		}
	}
	return maps
}

// entry is what Lookup found, with the name of where it came from.
func (s Source) entry(v shimconf.Value, err error) entry {
	cms := []*corev1.ConfigMap{s.Defaults, s.Configs}
	var tooLarge *shimconf.TooLargeError
	if errors.As(err, &tooLarge) {
		return entry{from: cms[tooLarge.Map].Name + " (binaryData " + tooLarge.Key + ")", err: fmt.Errorf("%w, which is not read", err)}
	}
	e := entry{value: v.Text, from: cms[v.Map].Name}
	if v.Binary != "" {
		e.from += " (binaryData " + v.Binary + ")"
	}
	return e
}

// configMap is a decoded ConfigMap for shimconf; binaryData is walked in
// key order.
type configMap struct{ cm *corev1.ConfigMap }

func (c configMap) Data(key string) (string, bool) {
	v, ok := c.cm.Data[key]
	return v, ok
}

func (c configMap) EachBinary(f func(key string, value func() ([]byte, error)) bool) {
	keys := make([]string, 0, len(c.cm.BinaryData))
	for k := range c.cm.BinaryData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.cm.BinaryData[k]
		if !f(k, func() ([]byte, error) { return v, nil }) {
			return
		}
	}
}

// Lookup returns the value of key in the ConfigMaps as the shim flattens
// them, where it came from, and whether any sets it; an error when the
// value that wins cannot be read.
func (s Source) Lookup(key string) (value, from string, ok bool, err error) {
	v, err := shimconf.Lookup(s.maps(), key)
	if err == nil && !v.Set {
		return "", "", false, nil
	}
	e := s.entry(v, err)
	return e.value, e.from, true, e.err
}
