package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/shimconf"
)

// configMapPayload is a ValidationRequest for a CREATE of ConfigMap name
// in ns with data and binaryData.
func configMapPayload(t *testing.T, settings, ns, name string, data, binary map[string]string) []byte {
	t.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}}
	if data != nil {
		obj["data"] = data
	}
	if binary != nil {
		obj["binaryData"] = binary
	}
	req := map[string]any{
		"uid": "u", "kind": map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"}, "namespace": ns, "name": name,
		"operation": "CREATE", "userInfo": map[string]any{"username": "admin"}, "object": obj,
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return []byte(`{"settings":` + settings + `,"request":` + string(b) + `}`)
}

// TestConfigValidation_yamlSyntax: a YAML syntax error is refused with
// yaml.v3's words. Natively only: yaml.v3 reports syntax errors by
// panicking and recovering, and TinyGo's WebAssembly has no recover, so
// the module traps on such a text (docs/BEHAVIOUR.md §3.9); the fixture
// table, which every runner shares, cannot hold this case.
func TestConfigValidation_yamlSyntax(t *testing.T) {
	answerFromFixtureCluster(t)
	out, err := validate(configMapPayload(t, `{"configValidation":{"mode":"enforce","namespace":"yunikorn-cv"}}`, "yunikorn-cv", "yunikorn-configs",
		map[string]string{"queues.yaml": "partitions:\n  - name: default\n   queues: [\n"}, nil))
	require.NoError(t, err)
	assert.False(t, gjson.GetBytes(out, "accepted").Bool())
	assert.Equal(t, "yaml: line 1: did not find expected '-' indicator", gjson.GetBytes(out, "message").String())
}

// TestConfigValidation_inflateBound: a compressed value that inflates past
// 16 MiB is not read: enforce refuses, saying so.
func TestConfigValidation_inflateBound(t *testing.T) {
	answerFromFixtureCluster(t)
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write(bytes.Repeat([]byte("#"), shimconf.MaxInflated+1))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	bomb := base64.StdEncoding.EncodeToString(b.Bytes())

	out, err := validate(configMapPayload(t, `{"configValidation":{"mode":"enforce","namespace":"yunikorn-cv"}}`, "yunikorn-cv", "yunikorn-configs",
		nil, map[string]string{"queues.yaml.gz": bomb}))
	require.NoError(t, err)
	assert.False(t, gjson.GetBytes(out, "accepted").Bool())
	assert.Equal(t, "configValidation: ConfigMap yunikorn-configs: binaryData queues.yaml.gz inflates to more than 16 MiB, which configValidation does not read",
		gjson.GetBytes(out, "message").String())
}

// TestConfigValidation_passThroughReadsNothing: a ConfigMap that is not
// YuniKorn's is admitted without a host call.
func TestConfigValidation_passThroughReadsNothing(t *testing.T) {
	prev := hostCaller
	hostCaller = func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		t.Errorf("unexpected host call %s/%s/%s", binding, namespace, operation)
		return nil, errors.New("no")
	}
	t.Cleanup(func() { hostCaller = prev })
	for _, c := range []struct{ ns, name string }{{"default", "yunikorn-configs"}, {"yunikorn", "kube-root-ca.crt"}} {
		out, err := validate(configMapPayload(t, `{"configValidation":"enforce"}`, c.ns, c.name, map[string]string{"queues.yaml": "x: ["}, nil))
		require.NoError(t, err)
		assert.True(t, gjson.GetBytes(out, "accepted").Bool(), "%s/%s", c.ns, c.name)
		assert.False(t, strings.Contains(string(out), "warnings"), "%s", out)
	}
}

// TestConfigValidation_tooLarge: a text over the bound is admitted
// unchecked, with a warning that says so, whatever it holds.
func TestConfigValidation_tooLarge(t *testing.T) {
	answerFromFixtureCluster(t)
	text := "partitions: [{name: default, queues: [{name: root, parent: maybe}]}]\n" + strings.Repeat("# padding\n", maxCheckedText/10)
	out, err := validate(configMapPayload(t, `{"configValidation":{"mode":"enforce","namespace":"yunikorn-cv"}}`, "yunikorn-cv", "yunikorn-configs",
		map[string]string{"queues.yaml": text}, nil))
	require.NoError(t, err)
	assert.True(t, gjson.GetBytes(out, "accepted").Bool())
	assert.Equal(t, "configValidation: queues.yaml is "+strconv.Itoa(len(text))+" bytes, more than the 256 KiB configValidation checks",
		gjson.GetBytes(out, "warnings.0").String())
}
