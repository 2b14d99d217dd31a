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
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The names of the two ConfigMaps the k8shim reads, in its namespace
// (k8shim v1.9 pkg/common/constants/constants.go).
const (
	ConfigMapName         = "yunikorn-configs"
	DefaultsConfigMapName = "yunikorn-defaults"
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

// flatten merges the ConfigMaps as the k8shim's FlattenConfigMaps does
// (k8shim v1.9 pkg/conf/schedulerconf.go): yunikorn-defaults first, then
// yunikorn-configs over it; in each, data first, then binaryData, whose keys
// lose their last dot-separated part and whose value is gunzipped when that
// part is "gz" (any other suffix yields an empty value, and a value that
// does not gunzip the empty key, as in the shim).
func flatten(s Source) map[string]entry {
	out := map[string]entry{}
	for _, cm := range []*corev1.ConfigMap{s.Defaults, s.Configs} {
		if cm == nil {
			continue
		}
		set := func(key string, e entry) {
			if prev, ok := out[key]; ok && prev.from != e.from && cm == s.Configs {
				e.over = &prev.value
			}
			out[key] = e
		}
		for k, v := range cm.Data {
			set(k, entry{value: v, from: cm.Name})
		}
		for k, v := range cm.BinaryData {
			key, value, err := decompress(k, v)
			set(key, entry{value: value, from: cm.Name + " (binaryData " + k + ")", err: err})
		}
	}
	return out
}

// maxInflated bounds what one compressed value may inflate to.
const maxInflated = 16 << 20

func decompress(key string, value []byte) (string, string, error) {
	parts := strings.Split(key, ".")
	suffix := parts[len(parts)-1]
	stripped, _ := strings.CutSuffix(key, "."+suffix)
	if !strings.EqualFold(suffix, "gz") {
		return stripped, "", nil
	}
	r, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return "", "", nil
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
	if err != nil {
		return "", "", nil
	}
	if len(b) > maxInflated {
		return stripped, "", fmt.Errorf("binaryData %s inflates to more than %d MiB, which is not read", key, maxInflated>>20)
	}
	return stripped, string(b), nil
}

// Lookup returns the value of key in the ConfigMaps as the shim flattens
// them, where it came from, and whether any sets it; an error when the
// value that wins cannot be read.
func (s Source) Lookup(key string) (value, from string, ok bool, err error) {
	e, ok := flatten(s)[key]
	if !ok {
		return "", "", false, nil
	}
	if e.err != nil {
		return "", e.from, true, e.err
	}
	return e.value, e.from, true, nil
}
