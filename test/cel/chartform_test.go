package celtest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/yunikorn-userinfo/userinfo/internal/cel"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// The Helm chart's form (modes cel and hybrid): cel.ChartPolicies, whose
// expressions read the settings from a ConfigMap parameter, compiled with
// params as the API server compiles a policy with a paramKind.

type chartSet struct {
	mutating   []*mutatingPolicy
	validating []struct {
		policy *admv1.ValidatingAdmissionPolicy
		v      validating.Validator
	}
}

func compileChart(t testing.TB) *chartSet {
	t.Helper()
	raw, err := cel.ChartPolicies()
	require.NoError(t, err)
	var f struct {
		Targets []struct {
			Name       string          `json:"name"`
			Mutating   json.RawMessage `json:"mutating"`
			Validating json.RawMessage `json:"validating"`
		} `json:"targets"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	cs := &chartSet{}
	for _, tg := range f.Targets {
		if tg.Mutating != nil {
			p := &admv1.MutatingAdmissionPolicy{}
			p.Name = tg.Name
			require.NoError(t, json.Unmarshal(tg.Mutating, &p.Spec))
			require.NotNil(t, p.Spec.ParamKind, "%s: reads a parameter", tg.Name)
			compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
			require.NoError(t, err)
			vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
			for i, v := range p.Spec.Variables {
				vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
			}
			compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
			m := &mutatingPolicy{policy: p, compiler: compiler}
			acc := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
			for i := range p.Spec.MatchConditions {
				acc[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
			}
			m.matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, opts, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
			popts := opts
			popts.HasPatchTypes = true
			for _, mu := range p.Spec.Mutations {
				res := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}, popts, environment.StoredExpressions)
				require.Empty(t, res.CompilationErrors(), "policy %s", p.Name)
				m.patchers = append(m.patchers, patch.NewJSONPatcher(res))
			}
			cs.mutating = append(cs.mutating, m)
		}
		p := &admv1.ValidatingAdmissionPolicy{}
		p.Name = tg.Name
		require.NoError(t, json.Unmarshal(tg.Validating, &p.Spec))
		require.NotNil(t, p.Spec.ParamKind, "%s: reads a parameter", tg.Name)
		compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		require.NoError(t, err)
		vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
		for i, v := range p.Spec.Variables {
			vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
		}
		compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
		var matcher matchconditions.Matcher
		if len(p.Spec.MatchConditions) > 0 {
			acc := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
			for i := range p.Spec.MatchConditions {
				acc[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
			}
			matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, opts, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
		}
		vals := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
		msgs := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
		for i, v := range p.Spec.Validations {
			vals[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
			if v.MessageExpression != "" {
				msgs[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			}
		}
		v := validating.NewValidator(
			compiler.CompileCondition(vals, opts, environment.StoredExpressions),
			matcher,
			compiler.CompileCondition(nil, opts, environment.StoredExpressions),
			compiler.CompileCondition(msgs, plugincel.OptionalVariableDeclarations{HasParams: true}, environment.StoredExpressions),
			p.Spec.FailurePolicy, nil)
		cs.validating = append(cs.validating, struct {
			policy *admv1.ValidatingAdmissionPolicy
			v      validating.Validator
		}{p, v})
	}
	return cs
}

// paramObject is the ConfigMap parameter the chart writes for s.
func paramObject(s *cel.Settings) runtime.Object {
	data := map[string]any{}
	for k, v := range cel.ParamData(s) {
		data[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "yunikorn-userinfo-cel", "namespace": "yunikorn-userinfo"}, "data": data}}
}

// evaluate is policySet.evaluate with the parameter bound.
func (cs *chartSet) evaluate(ctx context.Context, t testing.TB, r request, params runtime.Object) outcome {
	t.Helper()
	var obj runtime.Object = &unstructured.Unstructured{Object: runtime.DeepCopyJSON(r.object)}
	out := outcome{allowed: true}
	for _, m := range cs.mutating {
		if !matches(m.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		cctx := m.compiler.CreateContext(ctx)
		va := r.attrs(obj)
		res := m.matcher.Match(cctx, va, params, nil)
		if res.Error != nil {
			return outcome{message: "match condition: " + res.Error.Error()}
		}
		if !res.Matches {
			continue
		}
		for _, p := range m.patchers {
			o, err := p.Patch(cctx, patch.Request{MatchedResource: r.gvr, VersionedAttributes: va,
				ObjectInterfaces:  admission.NewObjectInterfacesFromScheme(scheme.Scheme),
				OptionalVariables: plugincel.OptionalVariableBindings{VersionedParams: params}}, celconfig.RuntimeCELCostBudget)
			if err != nil {
				return outcome{message: "mutation: " + err.Error()}
			}
			obj = o
			va = r.attrs(obj)
		}
	}
	for _, v := range cs.validating {
		if !matches(v.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		res := v.v.Validate(ctx, r.gvr, r.attrs(obj), params, nil, celconfig.RuntimeCELCostBudget, nil)
		for _, d := range res.Decisions {
			if d.Action != validating.ActionAdmit {
				return outcome{message: d.Message, reason: d.Reason}
			}
		}
	}
	out.object = obj.(*unstructured.Unstructured).Object
	return out
}

// TestChartForm_fixtures: the chart's form, with the parameter the chart
// writes for each fixture's settings, decides every fixture the literal
// form expresses exactly as the literal form does (TestFixtures holds the
// literal form to the module): verdict, message, reason and the stored
// annotation.
func TestChartForm_fixtures(t *testing.T) {
	ctx := context.Background()
	chart := compileChart(t)
	cases, err := fixtures.Load()
	require.NoError(t, err)
	sets := map[string]*policySet{}
	compared, allowed := 0, 0
	for _, c := range cases {
		s, err := cel.ParseSettings(c.Settings)
		var need *cel.ErrNeedsWebhook
		if errors.As(err, &need) || err != nil || s.ValidateOnly {
			// validateOnly: the chart refuses it (it is the twin's
			// setting, and the chart's form always mutates).
			continue
		}
		key := string(c.Settings)
		lit, ok := sets[key]
		if !ok {
			lit, err = compileSet(t, c.Settings)
			require.NoError(t, err)
			sets[key] = lit
		}
		r, ok := apiServerRequest(c.Request)
		if !ok {
			continue
		}
		compared++
		params := paramObject(s)
		t.Run(c.Name, func(t *testing.T) {
			want := lit.evaluate(ctx, t, r)
			got := chart.evaluate(ctx, t, r, params)
			require.Equal(t, want.allowed, got.allowed, "literal: %v %q; chart: %v %q", want.allowed, want.message, got.allowed, got.message)
			assert.Equal(t, want.message, got.message)
			assert.Equal(t, want.reason, got.reason)
			if !want.allowed {
				return
			}
			allowed++
			path := metaPath(r.gvk.Kind)
			wv, wok := annotation(want.object, path)
			gv, gok := annotation(got.object, path)
			assert.Equal(t, wok, gok)
			assert.Equal(t, wv, gv, "stored annotation")
		})
	}
	t.Logf("%d fixtures compared, %d of them admitted", compared, allowed)
	require.Greater(t, compared, 150)
}

// TestChartForm_identityCorpus: every identity of the corpus (quotes,
// backslashes, control characters, <>&, U+2028/9, invalid UTF-8, long
// names) is stamped or refused by the chart's form as by the literal form.
func TestChartForm_identityCorpus(t *testing.T) {
	ctx := context.Background()
	chart := compileChart(t)
	s, err := cel.ParseSettings([]byte(`{}`))
	require.NoError(t, err)
	lit, err := compileSet(t, []byte(`{}`))
	require.NoError(t, err)
	params := paramObject(s)
	for _, id := range corpus() {
		r, _ := podCreate(id)
		want := lit.evaluate(ctx, t, r)
		got := chart.evaluate(ctx, t, r, params)
		require.Equal(t, want.allowed, got.allowed, "%q: literal %q, chart %q", id.user, want.message, got.message)
		if want.allowed {
			wv, _ := annotation(want.object, []string{"metadata"})
			gv, _ := annotation(got.object, []string{"metadata"})
			assert.Equal(t, wv, gv, "%q", id.user)
		}
	}
}
