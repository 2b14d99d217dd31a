package celtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/cel"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// A compiled mutating policy, as the API server's compilePolicy builds it
// (k8s.io/apiserver/pkg/admission/plugin/policy/mutating/compilation.go):
// the same environment, variables, match conditions and patchers.
type mutatingPolicy struct {
	policy   *admv1.MutatingAdmissionPolicy
	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
}

func compileMutating(t testing.TB, p *admv1.MutatingAdmissionPolicy) *mutatingPolicy {
	t.Helper()
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	require.NoError(t, err)
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	m := &mutatingPolicy{policy: p, compiler: compiler}
	if len(p.Spec.MatchConditions) > 0 {
		acc := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			acc[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		m.matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, opts, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	popts := opts
	popts.HasPatchTypes = true
	for _, mu := range p.Spec.Mutations {
		require.Equal(t, admv1.PatchTypeJSONPatch, mu.PatchType)
		res := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}, popts, environment.StoredExpressions)
		require.Empty(t, res.CompilationErrors(), "policy %s", p.Name)
		m.patchers = append(m.patchers, patch.NewJSONPatcher(res))
	}
	return m
}

// compileValidating builds the validator as the API server's compilePolicy
// does (k8s.io/apiserver/pkg/admission/plugin/policy/validating/plugin.go).
func compileValidating(t testing.TB, p *admv1.ValidatingAdmissionPolicy) validating.Validator {
	t.Helper()
	optionalVars := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	exprVars := plugincel.OptionalVariableDeclarations{}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	require.NoError(t, err)
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, optionalVars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if len(p.Spec.MatchConditions) > 0 {
		acc := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			acc[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, optionalVars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	vals := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	msgs := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		vals[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			msgs[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return validating.NewValidator(
		compiler.CompileCondition(vals, optionalVars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, optionalVars, environment.StoredExpressions),
		compiler.CompileCondition(msgs, exprVars, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
}

// policySet is the generated policies of one settings object, compiled.
type policySet struct {
	mutating   []*mutatingPolicy
	validating []struct {
		policy *admv1.ValidatingAdmissionPolicy
		v      validatingValidator
	}
}

type validatingValidator = validating.Validator

func compileSet(t testing.TB, settings []byte) (*policySet, error) {
	t.Helper()
	s, err := cel.ParseSettings(settings)
	if err != nil {
		return nil, err
	}
	objs, err := cel.Objects(s, cel.Options{KubeVersion: "1.37"})
	require.NoError(t, err)
	ps := &policySet{}
	for _, o := range objs {
		j, err := json.Marshal(o)
		require.NoError(t, err)
		switch gjson.GetBytes(j, "kind").String() {
		case "MutatingAdmissionPolicy":
			var p admv1.MutatingAdmissionPolicy
			require.NoError(t, json.Unmarshal(j, &p))
			ps.mutating = append(ps.mutating, compileMutating(t, &p))
		case "ValidatingAdmissionPolicy":
			var p admv1.ValidatingAdmissionPolicy
			require.NoError(t, json.Unmarshal(j, &p))
			ps.validating = append(ps.validating, struct {
				policy *admv1.ValidatingAdmissionPolicy
				v      validating.Validator
			}{&p, compileValidating(t, &p)})
		}
	}
	return ps, nil
}

// matches reports whether rules select the request (resource with its
// subresource, operation), as matchConstraints do.
func matches(rules []admv1.NamedRuleWithOperations, gvr schema.GroupVersionResource, sub string, op admission.Operation) bool {
	res := gvr.Resource
	if sub != "" {
		res += "/" + sub
	}
	for _, r := range rules {
		okOp, okRes, okGroup := false, false, false
		for _, o := range r.Operations {
			okOp = okOp || string(o) == string(op)
		}
		for _, x := range r.Resources {
			okRes = okRes || x == res
		}
		for _, g := range r.APIGroups {
			okGroup = okGroup || g == gvr.Group
		}
		if okOp && okRes && okGroup {
			return true
		}
	}
	return false
}

// request is one admission request as the API server sees it.
type request struct {
	gvk       schema.GroupVersionKind
	gvr       schema.GroupVersionResource
	sub       string
	op        admission.Operation
	namespace string
	object    map[string]any
	oldObject map[string]any
	user      *user.DefaultInfo
}

// outcome is what the API server would do: refuse with a message, or
// store the object (whose annotation is read).
type outcome struct {
	allowed bool
	message string
	reason  metav1.StatusReason
	object  map[string]any
	// cost is the largest runtime cost one policy evaluation used.
	cost int64
}

func (r request) attrs(obj runtime.Object) *admission.VersionedAttributes {
	var old runtime.Object
	if r.oldObject != nil {
		old = &unstructured.Unstructured{Object: r.oldObject}
	}
	name, _, _ := unstructured.NestedString(r.object, "metadata", "name")
	var opts runtime.Object = &metav1.CreateOptions{}
	if r.op == admission.Update {
		opts = &metav1.UpdateOptions{}
	}
	a := admission.NewAttributesRecord(obj, old, r.gvk, r.namespace, name, r.gvr, r.sub, r.op, opts, false, r.user)
	return &admission.VersionedAttributes{Attributes: a, VersionedKind: r.gvk,
		VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}
}

// evaluate runs the mutating policies that match, then the validating
// ones on the result, as the API server's admission chain does.
func (ps *policySet) evaluate(ctx context.Context, t testing.TB, r request) outcome {
	t.Helper()
	var obj runtime.Object = &unstructured.Unstructured{Object: runtime.DeepCopyJSON(r.object)}
	out := outcome{allowed: true}
	for _, m := range ps.mutating {
		if !matches(m.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		cctx := m.compiler.CreateContext(ctx)
		va := r.attrs(obj)
		if m.matcher != nil {
			res := m.matcher.Match(cctx, va, nil, nil)
			if res.Error != nil {
				return outcome{message: "match condition: " + res.Error.Error()}
			}
			if !res.Matches {
				continue
			}
		}
		for _, p := range m.patchers {
			o, err := p.Patch(cctx, patch.Request{MatchedResource: r.gvr, VersionedAttributes: va,
				ObjectInterfaces: admission.NewObjectInterfacesFromScheme(scheme.Scheme)}, celconfig.RuntimeCELCostBudget)
			if err != nil {
				return outcome{message: "mutation: " + err.Error()}
			}
			obj = o
			va = r.attrs(obj)
		}
		if c := cctx.GetAndResetCost(); c > out.cost {
			out.cost = c
		}
	}
	for _, v := range ps.validating {
		if !matches(v.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		res := v.v.Validate(ctx, r.gvr, r.attrs(obj), nil, nil, celconfig.RuntimeCELCostBudget, nil)
		for _, d := range res.Decisions {
			if d.Action != validating.ActionAdmit {
				return outcome{message: d.Message, reason: d.Reason}
			}
		}
	}
	out.object = obj.(*unstructured.Unstructured).Object
	return out
}

// annotation reads the user.info annotation of an object at path.
func annotation(obj map[string]any, path []string) (string, bool) {
	v, ok, _ := unstructured.NestedString(obj, append(append([]string(nil), path...), "annotations", cel.AnnotationKey)...)
	return v, ok
}

// module runs the policy module (the one the tests build) on a bare
// AdmissionRequest.
type module struct{ eng *engine.Engine }

func newModule(ctx context.Context, t testing.TB) *module {
	t.Helper()
	path := fixtures.PolicyWasmPath()
	wasm, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("policy module: %v (run `make policy`)", err)
		}
		t.Skipf("no policy module at %s: run `make policy`", path)
	}
	eng, err := engine.New(ctx, wasm, engine.Options{MaxInstances: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = eng.Close(context.WithoutCancel(ctx)) })
	return &module{eng}
}

// verdict is the module's answer: accepted, message, and the object as
// the policy leaves it (request.object when it does not mutate).
type verdict struct {
	accepted bool
	message  string
	code     int
	object   []byte
}

func (m *module) validate(ctx context.Context, t testing.TB, req []byte, settings []byte) verdict {
	t.Helper()
	out, err := m.eng.Validate(ctx, []byte(`{"request":`+string(req)+`,"settings":`+string(settings)+`}`))
	require.NoError(t, err)
	r := gjson.ParseBytes(out)
	v := verdict{accepted: r.Get("accepted").Bool(), message: r.Get("message").String(), code: int(r.Get("code").Int())}
	if mo := r.Get("mutated_object"); mo.Exists() {
		v.object = []byte(mo.Raw)
	} else {
		v.object = []byte(gjson.GetBytes(req, "object").Raw)
	}
	return v
}

// toYAML is a debugging aid for failure messages.
func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

// costs measures what r costs each matching policy, with the API server's
// own cost tracking: the smallest runtime budget (to half a percent) under
// which the policy still evaluates without running out (variables
// included). It returns
// the largest cost of a mutating and of a validating policy.
func (ps *policySet) costs(ctx context.Context, t testing.TB, r request) (mutating, validatingCost int64) {
	t.Helper()
	least := func(ok func(budget int64) bool) int64 {
		lo, hi := int64(0), int64(celconfig.RuntimeCELCostBudget)
		if !ok(hi) {
			return -1
		}
		// To half a percent: each step evaluates the whole policy.
		for hi-lo > hi/200 {
			mid := (lo + hi) / 2
			if ok(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return hi
	}
	var obj runtime.Object = &unstructured.Unstructured{Object: runtime.DeepCopyJSON(r.object)}
	for _, m := range ps.mutating {
		if !matches(m.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		va := r.attrs(obj)
		for _, p := range m.patchers {
			c := least(func(budget int64) bool {
				_, err := p.Patch(m.compiler.CreateContext(ctx), patch.Request{MatchedResource: r.gvr, VersionedAttributes: va,
					ObjectInterfaces: admission.NewObjectInterfacesFromScheme(scheme.Scheme)}, budget)
				return err == nil
			})
			if c < 0 || c > mutating {
				mutating = c
			}
			if c < 0 {
				return
			}
			o, err := p.Patch(m.compiler.CreateContext(ctx), patch.Request{MatchedResource: r.gvr, VersionedAttributes: va,
				ObjectInterfaces: admission.NewObjectInterfacesFromScheme(scheme.Scheme)}, celconfig.RuntimeCELCostBudget)
			require.NoError(t, err)
			obj = o
		}
	}
	for _, v := range ps.validating {
		if !matches(v.policy.Spec.MatchConstraints.ResourceRules, r.gvr, r.sub, r.op) {
			continue
		}
		c := least(func(budget int64) bool {
			res := v.v.Validate(ctx, r.gvr, r.attrs(obj), nil, nil, budget, nil)
			for _, d := range res.Decisions {
				if d.Evaluation == validating.EvalError {
					return false
				}
			}
			return true
		})
		if c < 0 || c > validatingCost {
			validatingCost = c
		}
	}
	return mutating, validatingCost
}

func deepCopy(o map[string]any) map[string]any { return runtime.DeepCopyJSON(o) }
