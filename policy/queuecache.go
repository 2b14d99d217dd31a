package main

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/queues"
)

// The queue check's parsed configuration, kept across evaluations while
// the instance lives, keyed by the resourceVersions of the two ConfigMaps
// it was read from (docs/PERFORMANCE.md, "The queue configuration"). In a
// host that keeps instances (serve), a Pod then costs two get_resource
// calls masked to the resourceVersion rather than the ConfigMaps' whole
// text (up to 256 KiB), its copy into the module and its comparison with
// the text last parsed. Under policy-server every evaluation has a fresh
// instance: nothing is kept, and no masked call is made.
// (Under lastQueuesMu, set together.)
var (
	queuesVersion string // "" when none is known
	versionCfg    *queues.Config
	versionErr    error
)

// loadQueues is loadQueuesYAML and parseQueues, skipped while the two
// ConfigMaps keep their resourceVersions. loadErr is why the configuration
// cannot be read; parseErr why it is not one YuniKorn would load.
func loadQueues(qc *queueCheckSettings) (cfg *queues.Config, parseErr, loadErr error) {
	lastQueuesMu.Lock()
	known, kept, keptErr := queuesVersion, versionCfg, versionErr
	lastQueuesMu.Unlock()
	if known != "" {
		if v, err := queuesVersionNow(qc); err == nil && v == known {
			return kept, keptErr, nil
		}
	}
	text, version, err := loadQueuesYAML(qc)
	if err != nil {
		return nil, nil, err
	}
	cfg, parseErr = parseQueues(text)
	lastQueuesMu.Lock()
	queuesVersion, versionCfg, versionErr = version, cfg, parseErr
	lastQueuesMu.Unlock()
	return cfg, parseErr, nil
}

// queuesVersionNow reads the resourceVersions of the two ConfigMaps
// (masked: the host sends nothing else) as the key loadQueuesYAML gives.
func queuesVersionNow(qc *queueCheckSettings) (string, error) {
	var rv [2]string
	var found [2]bool
	for i, name := range [...]string{configMapDefaults, configMapConfigs} {
		b := make([]byte, 0, 200)
		b = append(b, `{"api_version":"v1","kind":"ConfigMap","name":`...)
		b = appendJSONString(b, name)
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, qc.namespace)
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
	}
	return versionKey(qc, found, rv), nil
}

// versionKey names the configuration read from the two ConfigMaps: ""
// (nothing to key by) when a map that exists has no resourceVersion.
func versionKey(qc *queueCheckSettings, found [2]bool, rv [2]string) string {
	key := qc.namespace + "\x00" + qc.policyGroup
	for i := range rv {
		switch {
		case !found[i]:
			key += "\x00-"
		case rv[i] == "":
			return ""
		default:
			key += "\x00" + rv[i]
		}
	}
	return key
}
