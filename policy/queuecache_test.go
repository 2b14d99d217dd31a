package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// TestQueueCheck_parsesOncePerResourceVersion: while yunikorn-configs keeps
// its resourceVersion, a Pod costs two masked get_resource calls and no
// parse; a new resourceVersion is read and parsed again, and a map that
// gives no resourceVersion is read every time.
func TestQueueCheck_parsesOncePerResourceVersion(t *testing.T) {
	// Not parallel: it owns hostCaller and the instance's caches.
	freshInstance(t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	var payload []byte
	for _, c := range cases {
		if c.Name == "pod/queue/enforce/yaml-syntax-error" {
			payload = c.Payload()
		}
	}
	require.NotNil(t, payload)
	text := "partitions:\n  - name: default\n    placementrules: [{name: tag, value: namespace, create: true}]\n    queues: [{name: root, submitacl: '*'}]\n"
	rv := "7"
	var full, masked int
	prev := hostCaller
	hostCaller = func(binding, namespace, operation string, req []byte) ([]byte, error) {
		if operation != "get_resource" || gjson.GetBytes(req, "kind").String() != "ConfigMap" {
			return nil, errString("Cannot find it")
		}
		if gjson.GetBytes(req, "field_masks").Exists() {
			masked++
		}
		if gjson.GetBytes(req, "name").String() == "yunikorn-defaults" {
			return nil, errString("Cannot find ConfigMap yunikorn-defaults")
		}
		meta := map[string]any{"name": "yunikorn-configs", "namespace": "yunikorn-typo"}
		if rv != "" {
			meta["resourceVersion"] = rv
		}
		if gjson.GetBytes(req, "field_masks").Exists() {
			return json.Marshal(map[string]any{"metadata": meta})
		}
		full++
		return json.Marshal(map[string]any{"metadata": meta, "data": map[string]string{"queues.yaml": text}})
	}
	t.Cleanup(func() { hostCaller = prev })

	eval := func() string {
		out, err := validate(payload)
		require.NoError(t, err)
		return string(out)
	}
	out := eval()
	assert.NotContains(t, out, "skipped")
	assert.Equal(t, [2]int{1, 0}, [2]int{full, masked}, "the first Pod reads yunikorn-configs whole")
	for range 3 {
		assert.Equal(t, out, eval())
	}
	assert.Equal(t, [2]int{1, 6}, [2]int{full, masked}, "then only its resourceVersion, twice a Pod")

	rv, text = "8", strings.Replace(text, "'*'", "nobody", 1)
	out = eval()
	assert.Contains(t, out, "YuniKorn will reject", "a new resourceVersion: the new text is read and checked")
	assert.Equal(t, 2, full)

	rv = ""
	eval()
	eval()
	assert.Equal(t, 4, full, "without a resourceVersion, the text is read every time")
}
