package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// fakeYuniKorn answers get_resource for YuniKorn's two ConfigMaps in
// namespace yk from its fields, counting the whole reads.
type fakeYuniKorn struct {
	configs, defaults map[string]any // nil: absent
	rv                string
	fail              string // every call fails with this
	full, masked      int
}

func (f *fakeYuniKorn) install(t *testing.T) {
	withHost(t, func(_, _, operation string, req []byte) ([]byte, error) {
		if f.fail != "" {
			return nil, errString(f.fail)
		}
		if operation != "get_resource" || gjson.GetBytes(req, "kind").String() != "ConfigMap" ||
			gjson.GetBytes(req, "namespace").String() != "yk" {
			return nil, errString("Cannot find it")
		}
		name := gjson.GetBytes(req, "name").String()
		cm := f.configs
		if name == "yunikorn-defaults" {
			cm = f.defaults
		}
		if cm == nil {
			return nil, errString("Cannot find ConfigMap " + name)
		}
		meta := map[string]any{"name": name, "namespace": "yk", "resourceVersion": f.rv + name}
		if gjson.GetBytes(req, "field_masks").Exists() {
			f.masked++
			return json.Marshal(map[string]any{"metadata": meta})
		}
		f.full++
		out := map[string]any{"metadata": meta}
		for k, v := range cm {
			out[k] = v
		}
		return json.Marshal(out)
	})
}

// followRequest: livy (groups g1, g"2) creates a Pod in spark whose
// user.info names carol; claim false leaves the annotation out.
func followPayload(settings string, claim bool) []byte {
	req := rbacRequest
	if !claim {
		req = strings.Replace(req, `{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"carol\"}"}}`, `{}`, 1)
	}
	return []byte(`{"settings":` + settings + `,"request":` + req + `}`)
}

func evalFollow(t *testing.T, settings string, claim bool) gjson.Result {
	t.Helper()
	out, err := validate(followPayload(settings, claim))
	require.NoError(t, err)
	return gjson.ParseBytes(out)
}

func data(kv ...string) map[string]any {
	d := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	return map[string]any{"data": d}
}

const followYK = `{"followYuniKornConfig":{"namespace":"yk"}}`

// TestFollow_editChangesTheRule: an edit of yunikorn-configs (a new
// resourceVersion) changes the rule at the next request; while the
// resourceVersions stay, a request costs two masked reads and no mapping.
func TestFollow_editChangesTheRule(t *testing.T) {
	f := &fakeYuniKorn{configs: data(), rv: "1"}
	f.install(t)
	r := evalFollow(t, followYK, true)
	assert.False(t, r.Get("accepted").Bool(), "livy is no external user yet: %s", r.Raw)
	assert.Equal(t, 1, f.full, "yunikorn-configs read whole once (yunikorn-defaults is absent)")

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", "^livy$"), "2"
	r = evalFollow(t, followYK, true)
	assert.True(t, r.Get("accepted").Bool(), "the edit makes livy an external user: %s", r.Raw)
	assert.False(t, r.Get("warnings").Exists(), r.Raw)
	full, masked := f.full, f.masked
	for range 3 {
		assert.True(t, evalFollow(t, followYK, true).Get("accepted").Bool())
	}
	assert.Equal(t, full, f.full, "the same resourceVersions: nothing read whole again")
	assert.Equal(t, 3, f.masked-masked, "a masked read of yunikorn-configs a request (yunikorn-defaults is absent)")

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", ""), "3"
	assert.False(t, evalFollow(t, followYK, true).Get("accepted").Bool(), "emptied again: refused")
}

// TestFollow_precedence: a key the ConfigMaps set wins over the settings;
// one they do not set keeps the settings' value; yunikorn-configs wins
// over yunikorn-defaults, which is read too (gzip included).
func TestFollow_precedence(t *testing.T) {
	settings := `{"followYuniKornConfig":{"namespace":"yk"},"externalUsers":["^livy$"]}`
	f := &fakeYuniKorn{configs: data(), rv: "1"}
	f.install(t)
	assert.True(t, evalFollow(t, settings, true).Get("accepted").Bool(), "not set in the ConfigMaps: the settings' value")

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", "^someone-else$"), "2"
	assert.False(t, evalFollow(t, settings, true).Get("accepted").Bool(), "set in the ConfigMaps: theirs wins")

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("^livy$"))
	require.NoError(t, zw.Close())
	f.configs = data()
	f.defaults = map[string]any{"binaryData": map[string]any{
		"admissionController.accessControl.externalUsers.gz": base64.StdEncoding.EncodeToString(gz.Bytes())}}
	f.rv = "3"
	assert.True(t, evalFollow(t, followYK, true).Get("accepted").Bool(), "yunikorn-defaults' compressed value is read")
	f.configs, f.rv = data("admissionController.accessControl.externalUsers", ""), "4"
	assert.False(t, evalFollow(t, followYK, true).Get("accepted").Bool(), "yunikorn-configs' empty list wins over the defaults'")
}

// TestFollow_bypassAuthNotFollowed: bypassAuth "true" is YuniKorn's
// admission controller standing aside, not this policy's setting: a
// forged value stays refused; "false" wins over the settings' true.
func TestFollow_bypassAuthNotFollowed(t *testing.T) {
	f := &fakeYuniKorn{configs: data("admissionController.accessControl.bypassAuth", "true"), rv: "1"}
	f.install(t)
	r := evalFollow(t, followYK, true)
	assert.False(t, r.Get("accepted").Bool(), r.Raw)
	assert.False(t, r.Get("warnings").Exists(), "the hand-over is no problem to warn about: %s", r.Raw)

	withBypass := `{"followYuniKornConfig":{"namespace":"yk"},"bypassAuth":true}`
	assert.True(t, evalFollow(t, withBypass, true).Get("accepted").Bool(), "the settings' own bypassAuth stays")
	f.configs, f.rv = data("admissionController.accessControl.bypassAuth", "false"), "2"
	assert.False(t, evalFollow(t, withBypass, true).Get("accepted").Bool(), "the ConfigMap's false wins")
}

// TestFollow_typoKeepsTheLastGood: a value YuniKorn cannot use keeps the
// value last read (else the settings'), with a warning on every answer;
// fixed, the warning goes.
func TestFollow_typoKeepsTheLastGood(t *testing.T) {
	f := &fakeYuniKorn{configs: data("admissionController.accessControl.externalUsers", "^livy$"), rv: "1"}
	f.install(t)
	require.True(t, evalFollow(t, followYK, true).Get("accepted").Bool())

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", "^livy$,(unclosed"), "2"
	r := evalFollow(t, followYK, true)
	assert.True(t, r.Get("accepted").Bool(), "the value last read stays: %s", r.Raw)
	assert.Equal(t, `["followYuniKornConfig: admissionController.accessControl.externalUsers in yk/yunikorn-configs: its value is not one YuniKorn can use `+
		`(see the policy's log); the value last read stays in force until it is fixed"]`, r.Get("warnings").Raw)

	f.configs, f.rv = data("admissionController.accessControl.trustControllers", "ture"), "3"
	r = evalFollow(t, followYK, false)
	assert.True(t, r.Get("accepted").Bool(), r.Raw)
	assert.Contains(t, r.Get("warnings").Raw, "trustControllers in yk/yunikorn-configs: its value is not one YuniKorn can use (see the policy's log); "+
		"the settings' own value stays in force", "no good value read yet: the settings'")

	f.configs, f.rv = data("admissionController.accessControl.trustControllers", "false"), "4"
	r = evalFollow(t, followYK, false)
	assert.False(t, r.Get("warnings").Exists(), r.Raw)
}

// TestFollow_commaSplitIsNoValue: a followed list that YuniKorn's split at
// every comma cuts inside a pattern (^svc-[a-z]{1,8}$ into ^svc-[a-z]{1 and
// 8}$, which matches mallory8}) is a value the policy cannot use, as a
// typo is: the value last read stays, every answer says so.
func TestFollow_commaSplitIsNoValue(t *testing.T) {
	as := func(user string, claim bool) gjson.Result {
		t.Helper()
		payload := strings.Replace(string(followPayload(followYK, claim)), `"username":"livy"`, `"username":`+quote(user), 1)
		out, err := validate([]byte(payload))
		require.NoError(t, err)
		return gjson.ParseBytes(out)
	}
	f := &fakeYuniKorn{configs: data("admissionController.accessControl.externalUsers", "^livy$"), rv: "1"}
	f.install(t)
	require.True(t, as("livy", true).Get("accepted").Bool())

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", "^livy$,^svc-[a-z]{1,8}$"), "2"
	r := as("mallory8}", true)
	assert.False(t, r.Get("accepted").Bool(), "the piece 8}$ trusts no one: %s", r.Raw)
	want := `followYuniKornConfig: admissionController.accessControl.externalUsers in yk/yunikorn-configs: YuniKorn splits it at every comma, ` +
		`also one inside {m,n}, [...] or (...), and piece "^svc-[a-z]{1" is not a whole pattern (write the pattern without a comma) ` +
		`(see the policy's log); the value last read stays in force until it is fixed`
	assert.Equal(t, []any{want}, r.Get("warnings").Value(), "on a refusal")
	r = as("livy", true)
	assert.True(t, r.Get("accepted").Bool(), "the value last read stays: %s", r.Raw)
	assert.Equal(t, []any{want}, r.Get("warnings").Value(), "and on every other answer")
	r = as("bob", false)
	assert.Equal(t, []any{want}, r.Get("warnings").Value(), "an answer that supplies nothing too")

	f.configs, f.rv = data("admissionController.accessControl.externalUsers", "^livy$,^svc-[a-z]+$"), "3"
	r = as("livy", true)
	assert.True(t, r.Get("accepted").Bool())
	assert.False(t, r.Get("warnings").Exists(), "fixed: %s", r.Raw)
}

// TestFollow_generateUniqueAppIdNotForOwnership: YuniKorn's scheduler
// reads generateUniqueAppId only when it starts, so the ownership model
// keeps its settings' value while the ConfigMap says otherwise (an
// unlabelled Pod is still checked against its namespace's application),
// and every answer says that the two are apart; the scheduling jobs,
// YuniKorn's admission controller's, follow it at once.
func TestFollow_generateUniqueAppIdNotForOwnership(t *testing.T) {
	settings := `{"followYuniKornConfig":{"namespace":"yk"},"applicationOwnership":"enforce"}`
	s, err := parseSettings(gjson.Parse(settings))
	require.NoError(t, err)
	f := &fakeYuniKorn{configs: data("admissionController.filtering.generateUniqueAppId", "true"), rv: "1"}
	f.install(t)
	eff, warnings := followed(s)
	assert.False(t, eff.AppOwnership.opts.UniqueAppIDs, "the settings' value")
	assert.Equal(t, s.AppOwnership.opts.IndexName(), eff.AppOwnership.opts.IndexName(), "the index serve keeps for the settings")
	assert.Equal(t, []string{`followYuniKornConfig: admissionController.filtering.generateUniqueAppId in yk/yunikorn-configs is true, ` +
		`while applicationOwnership checks with generateUniqueAppIds false from its settings. YuniKorn's scheduler reads the key only when it ` +
		`starts (restart required), so the check does not follow it: once the scheduler runs with true, set ` +
		`settings.applicationOwnership.generateUniqueAppIds (or scheduling's) to true and restart the webhook`}, warnings)

	f.configs, f.rv = data(), "2"
	_, warnings = followed(s)
	assert.Empty(t, warnings, "not set: YuniKorn's default false, as the settings")

	unique, err := parseSettings(gjson.Parse(`{"followYuniKornConfig":{"namespace":"yk"},"applicationOwnership":{"mode":"warn","generateUniqueAppIds":true},"scheduling":{}}`))
	require.NoError(t, err)
	eff, warnings = followed(unique)
	assert.True(t, eff.AppOwnership.opts.UniqueAppIDs)
	assert.True(t, eff.Scheduling.uniqueAppIDs, "not set: the settings' value")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "generateUniqueAppId in yk/yunikorn-configs is not set (YuniKorn's default: false), while applicationOwnership checks with generateUniqueAppIds true")

	f.configs, f.rv = data("admissionController.filtering.generateUniqueAppId", "false"), "3"
	eff, warnings = followed(unique)
	assert.True(t, eff.AppOwnership.opts.UniqueAppIDs)
	assert.False(t, eff.Scheduling.uniqueAppIDs, "the scheduling jobs follow the ConfigMap at once")
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "generateUniqueAppId in yk/yunikorn-configs is false, while applicationOwnership checks with generateUniqueAppIds true")
}

// TestFollow_unreadable: ConfigMaps that cannot be read keep the rules
// last read, else the settings', and say so; neither ConfigMap existing
// is the settings' values, said too.
func TestFollow_unreadable(t *testing.T) {
	f := &fakeYuniKorn{fail: "forbidden: configmaps is forbidden"}
	f.install(t)
	r := evalFollow(t, followYK, true)
	assert.False(t, r.Get("accepted").Bool())
	assert.Contains(t, r.Get("warnings").Raw, "the settings' own values are in force")

	f.fail, f.configs, f.rv = "", data("admissionController.accessControl.externalUsers", "^livy$"), "1"
	require.True(t, evalFollow(t, followYK, true).Get("accepted").Bool())
	f.fail = "connection refused"
	r = evalFollow(t, followYK, true)
	assert.True(t, r.Get("accepted").Bool(), "the rules last read stay: %s", r.Raw)
	assert.Contains(t, r.Get("warnings").Raw, "the rules last read from yk/yunikorn-configs stay in force")

	f.fail, f.configs, f.rv = "", nil, "2"
	r = evalFollow(t, followYK, true)
	assert.False(t, r.Get("accepted").Bool(), "deleted: the settings' values")
	assert.Contains(t, r.Get("warnings").Raw, "neither yunikorn-defaults nor yunikorn-configs exists in namespace yk")
}

// TestFollow_filtering: with scheduling on, the filtering keys are
// followed into it.
func TestFollow_filtering(t *testing.T) {
	settings := `{"followYuniKornConfig":{"namespace":"yk"},"scheduling":{}}`
	f := &fakeYuniKorn{configs: data(), rv: "1"}
	f.install(t)
	sched := func() string {
		r := evalFollow(t, settings, false)
		require.True(t, r.Get("accepted").Bool(), r.Raw)
		return r.Get("mutated_object.spec.schedulerName").String()
	}
	assert.Equal(t, "yunikorn", sched(), "spark is processed by default")
	f.configs, f.rv = data("admissionController.filtering.bypassNamespaces", "^kube-system$,^spark$"), "2"
	assert.Equal(t, "", sched(), "bypassed by the edit: the scheduler is left alone")
}

func TestFollow_settings(t *testing.T) {
	for _, tc := range []struct{ settings, want string }{
		{`{"followYuniKornConfig":true}`, `{"valid":true}`},
		{`{"followYuniKornConfig":false}`, `{"valid":true}`},
		{`{"followYuniKornConfig":{"namespace":"yk"}}`, `{"valid":true}`},
		{`{"followYuniKornConfig":"yes"}`, `{"valid":false,"message":"settings.followYuniKornConfig: must be a boolean or an object with namespace, got string \"yes\""}`},
		{`{"followYuniKornConfig":{"namespace":""}}`, `{"valid":false,"message":"settings.followYuniKornConfig.namespace: must be a namespace name (not empty, no spaces or slashes), got \"\""}`},
		{`{"followYuniKornConfig":{"name":"x"}}`, `{"valid":false,"message":"settings.followYuniKornConfig: unknown key \"name\" (known keys: namespace)"}`},
		{`{"followYuniKornConfig":true,"systemUsers":["^a$"]}`, `{"valid":true,"message":"warning: settings.systemUsers: followYuniKornConfig is on, ` +
			`so the admissionController.accessControl key of yunikorn-configs in namespace yunikorn decides while it is set there; this value is in force only where it is not"}`},
	} {
		out, err := validateSettings([]byte(tc.settings))
		require.NoError(t, err)
		assert.JSONEq(t, tc.want, string(out), tc.settings)
	}
}

// BenchmarkFollow: the cost of followYuniKornConfig on a request while the
// ConfigMaps keep their resourceVersions (two masked reads, answered in
// memory here), against the same settings written out.
func BenchmarkFollow(b *testing.B) {
	f := &fakeYuniKorn{configs: data("admissionController.accessControl.externalUsers", "^livy$"), rv: "1"}
	prev := hostCaller
	b.Cleanup(func() { hostCaller = prev })
	hostCaller = func(_, _, _ string, req []byte) ([]byte, error) {
		name := gjson.GetBytes(req, "name").String()
		if name == "yunikorn-defaults" {
			return nil, errString("Cannot find ConfigMap " + name)
		}
		meta := `{"name":"yunikorn-configs","namespace":"yk","resourceVersion":"1"}`
		if gjson.GetBytes(req, "field_masks").Exists() {
			return []byte(`{"metadata":` + meta + `}`), nil
		}
		f.full++
		return []byte(`{"metadata":` + meta + `,"data":{"admissionController.accessControl.externalUsers":"^livy$"}}`), nil
	}
	for _, bc := range []struct{ name, settings string }{
		{"written-out", `{"externalUsers":["^livy$"]}`},
		{"followed", followYK},
	} {
		payload := followPayload(bc.settings, true)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := validate(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
