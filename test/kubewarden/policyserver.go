// Package kubewarden is a test double of Kubewarden's policy-server on
// wasmtime: it evaluates a waPC policy module the way policy-evaluator does
// (a fresh instance per evaluation, _start then wapc_init, the request
// re-serialised by serde_json, the JSONPatch computed from mutated_object
// with the json-patch crate's algorithm), so the fixture table can check
// what the module answers where users run it. It shares no code with
// host/engine. See docs/KUBEWARDEN.md.
package kubewarden

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/bytecodealliance/wasmtime-go/v39"
)

// PolicyServer holds one compiled module; every call instantiates it anew,
// like policy-server's PolicyEvaluatorPre rehydrated per request.
type PolicyServer struct {
	engine *wasmtime.Engine
	module *wasmtime.Module
	linker *wasmtime.Linker

	// Kubernetes answers kubewarden/kubernetes/* (policy-server's
	// callback handler); nil refuses them.
	Kubernetes func(operation string, payload []byte) ([]byte, error)

	mu   sync.Mutex
	logs [][]byte // kubewarden/tracing/log payloads, in order
}

// call is the waPC state of one invocation, kept as the store's data.
type call struct {
	operation, payload []byte
	response, guestErr []byte
	hostResponse       []byte
	hostErr            []byte
	server             *PolicyServer
}

// New compiles the module and links WASI preview 1 and the nine waPC
// imports.
func New(wasm []byte) (*PolicyServer, error) {
	engine := wasmtime.NewEngine()
	module, err := wasmtime.NewModule(engine, wasm)
	if err != nil {
		return nil, fmt.Errorf("compile module: %w", err)
	}
	linker := wasmtime.NewLinker(engine)
	if err := linker.DefineWasi(); err != nil {
		return nil, fmt.Errorf("link WASI: %w", err)
	}
	p := &PolicyServer{engine: engine, module: module, linker: linker}
	if err := p.linkWapc(); err != nil {
		return nil, fmt.Errorf("link waPC: %w", err)
	}
	return p, nil
}

func memory(c *wasmtime.Caller) []byte {
	return c.GetExport("memory").Memory().UnsafeData(c)
}

func state(c *wasmtime.Caller) *call { return c.Data().(*call) }

func (p *PolicyServer) linkWapc() error {
	read := func(c *wasmtime.Caller, ptr, n int32) []byte {
		return bytes.Clone(memory(c)[uint32(ptr) : uint32(ptr)+uint32(n)])
	}
	funcs := map[string]any{
		"__guest_request": func(c *wasmtime.Caller, opPtr, ptr int32) {
			s, m := state(c), memory(c)
			copy(m[uint32(opPtr):], s.operation)
			copy(m[uint32(ptr):], s.payload)
		},
		"__guest_response": func(c *wasmtime.Caller, ptr, n int32) { state(c).response = read(c, ptr, n) },
		"__guest_error":    func(c *wasmtime.Caller, ptr, n int32) { state(c).guestErr = read(c, ptr, n) },
		"__host_call": func(c *wasmtime.Caller, bdPtr, bdLen, nsPtr, nsLen, opPtr, opLen, ptr, n int32) int32 {
			s := state(c)
			binding, namespace, operation := read(c, bdPtr, bdLen), read(c, nsPtr, nsLen), read(c, opPtr, opLen)
			s.hostResponse, s.hostErr = nil, nil
			// policy-evaluator's callback: kubewarden/tracing/log, and
			// the Kubernetes capabilities when a handler is set.
			if string(binding) == "kubewarden" && string(namespace) == "tracing" && string(operation) == "log" {
				s.server.mu.Lock()
				s.server.logs = append(s.server.logs, read(c, ptr, n))
				s.server.mu.Unlock()
				s.hostResponse = []byte{}
				return 1
			}
			if string(binding) == "kubewarden" && string(namespace) == "kubernetes" && s.server.Kubernetes != nil {
				out, err := s.server.Kubernetes(string(operation), read(c, ptr, n))
				if err != nil {
					s.hostErr = []byte(err.Error())
					return 0
				}
				s.hostResponse = out
				return 1
			}
			s.hostErr = []byte(fmt.Sprintf("unknown operation %s/%s/%s", binding, namespace, operation))
			return 0
		},
		"__host_response":     func(c *wasmtime.Caller, ptr int32) { copy(memory(c)[uint32(ptr):], state(c).hostResponse) },
		"__host_response_len": func(c *wasmtime.Caller) int32 { return int32(len(state(c).hostResponse)) },
		"__host_error":        func(c *wasmtime.Caller, ptr int32) { copy(memory(c)[uint32(ptr):], state(c).hostErr) },
		"__host_error_len":    func(c *wasmtime.Caller) int32 { return int32(len(state(c).hostErr)) },
		"__console_log":       func(c *wasmtime.Caller, ptr, n int32) {},
	}
	for name, f := range funcs {
		if err := p.linker.FuncWrap("wapc", name, f); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Logs returns the payloads the module logged through the host so far.
func (p *PolicyServer) Logs() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.logs...)
}

// invoke runs one waPC operation in a fresh instance: instantiate, call
// _start (a WASI exit with code 0 is not a failure) and wapc_init, each only
// if exported, never _initialize, then __guest_call.
func (p *PolicyServer) invoke(operation string, payload []byte) ([]byte, error) {
	s := &call{operation: []byte(operation), payload: payload, server: p}
	store := wasmtime.NewStoreWithData(p.engine, s)
	defer store.Close()
	store.SetWasi(wasmtime.NewWasiConfig())
	inst, err := p.linker.Instantiate(store, p.module)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	if f := inst.GetFunc(store, "_start"); f != nil {
		if _, err := f.Call(store); err != nil && !exitedWithZero(err) {
			return nil, fmt.Errorf("_start: %w", err)
		}
	}
	if f := inst.GetFunc(store, "wapc_init"); f != nil {
		if _, err := f.Call(store); err != nil {
			return nil, fmt.Errorf("wapc_init: %w", err)
		}
	}
	guestCall := inst.GetFunc(store, "__guest_call")
	if guestCall == nil {
		return nil, errors.New("module does not export __guest_call")
	}
	ok, err := guestCall.Call(store, int32(len(s.operation)), int32(len(s.payload)))
	if err != nil {
		return nil, fmt.Errorf("guest call failure: %w", err)
	}
	if ok.(int32) != 1 {
		return nil, fmt.Errorf("guest call failure: %s", s.guestErr)
	}
	return s.response, nil
}

// exitedWithZero reports whether err is a WASI exit with code 0.
func exitedWithZero(err error) bool {
	var werr *wasmtime.Error
	if !errors.As(err, &werr) {
		return false
	}
	code, ok := werr.ExitStatus()
	return ok && code == 0
}

// ValidateSettings is policy-server's check at boot: a policy whose settings
// are not valid is never served.
func (p *PolicyServer) ValidateSettings(settings []byte) (valid bool, message string, err error) {
	v, err := parse(settings, 0)
	if err != nil {
		return false, "", err
	}
	if v == nil {
		v = map[string]any{}
	}
	out, err := p.invoke("validate_settings", encodeJSON(v))
	if err != nil {
		return false, "", err
	}
	var r struct {
		Valid   bool    `json:"valid"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return false, "", fmt.Errorf("settings response: %w", err)
	}
	if r.Message != nil {
		message = *r.Message
	}
	return r.Valid, message, nil
}

// AdmissionResponse is the response policy-server puts in its
// AdmissionReview.
type AdmissionResponse struct {
	UID              string            `json:"uid"`
	Allowed          bool              `json:"allowed"`
	PatchType        *string           `json:"patchType,omitempty"`
	Patch            *string           `json:"patch,omitempty"`
	Status           *Status           `json:"status,omitempty"`
	AuditAnnotations map[string]string `json:"auditAnnotations"`
	Warnings         []string          `json:"warnings"`
}

// Status is the response's status: the policy's message and code.
type Status struct {
	Message *string `json:"message,omitempty"`
	Code    *uint16 `json:"code,omitempty"`
}

// Validate evaluates an AdmissionRequest (as it appears in the review the
// API server sent) with the given settings. An error means policy-server
// would not have evaluated the policy at all (errUnparseable: the body is
// refused before any policy runs).
func (p *PolicyServer) Validate(request, settings []byte) ([]byte, error) {
	req, payload, err := validatePayload(request, settings)
	if err != nil {
		return nil, err
	}
	out, err := p.invoke("validate", payload)
	if err != nil {
		return reject(req["uid"].(string), "internal server error: "+err.Error(), 500), nil
	}
	return admissionResponse(req, out)
}

// validatePayload is what policy-server hands the policy: the typed
// request and the settings, re-serialised.
func validatePayload(request, settings []byte) (map[string]any, []byte, error) {
	// The request sits two levels deep in the AdmissionReview body.
	raw, err := parse(request, 1)
	if err != nil {
		return nil, nil, err
	}
	req, err := typedRequest(raw)
	if err != nil {
		return nil, nil, err
	}
	set, err := parse(settings, 0)
	if err != nil {
		return nil, nil, err
	}
	if set == nil {
		set = map[string]any{}
	}
	return req, encodeJSON(map[string]any{"request": req, "settings": set}), nil
}

// admissionResponse builds the AdmissionResponse from the policy's answer
// out, as policy-evaluator does.
func admissionResponse(req map[string]any, out []byte) ([]byte, error) {
	uid := req["uid"].(string)
	var resp struct {
		Accepted         bool              `json:"accepted"`
		Message          *string           `json:"message"`
		Code             *uint16           `json:"code"`
		MutatedObject    json.RawMessage   `json:"mutated_object"`
		AuditAnnotations map[string]string `json:"audit_annotations"`
		Warnings         []string          `json:"warnings"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return reject(uid, "internal server error: invalid response: "+err.Error(), 500), nil
	}
	ar := AdmissionResponse{UID: uid, Allowed: resp.Accepted, AuditAnnotations: resp.AuditAnnotations, Warnings: resp.Warnings}
	if m := resp.MutatedObject; len(m) > 0 && string(m) != "null" {
		object, present := req["object"]
		if !present {
			msg := "Incoming object is null, which happens only with DELETE operations, but the policy is attempting a mutation. This is not allowed"
			return json.Marshal(AdmissionResponse{UID: uid, Status: &Status{Message: &msg}})
		}
		mutated, err := parse(m, 0)
		if err != nil {
			return reject(uid, "internal server error: mutated_object: "+err.Error(), 500), nil
		}
		if ops := diff(object, mutated); len(ops) > 0 {
			patch := base64.StdEncoding.EncodeToString(encodePatch(ops))
			patchType := "JSONPatch"
			ar.Patch, ar.PatchType = &patch, &patchType
		}
	}
	if resp.Message != nil || resp.Code != nil {
		ar.Status = &Status{Message: resp.Message, Code: resp.Code}
	}
	return json.Marshal(ar)
}

func reject(uid, message string, code uint16) []byte {
	out, _ := json.Marshal(map[string]any{"uid": uid, "allowed": false, "status": map[string]any{"message": message, "code": code}})
	return out
}

// typedRequest keeps what policy-evaluator's AdmissionRequest struct keeps:
// its fields, with optional ones that are null dropped, and unknown ones
// gone. A required field that is missing or of the wrong type makes the
// body unparseable.
func typedRequest(v value) (map[string]any, error) {
	in, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: request is not an object", errUnparseable)
	}
	out := map[string]any{}
	str := func(key string, required bool) error {
		s, present := in[key]
		if !present || s == nil {
			if required {
				return fmt.Errorf("%w: request.%s is required", errUnparseable, key)
			}
			return nil
		}
		if _, ok := s.(string); !ok {
			return fmt.Errorf("%w: request.%s must be a string", errUnparseable, key)
		}
		out[key] = s
		return nil
	}
	group := func(key string, required bool, fields ...string) error {
		g, present := in[key]
		if !present || g == nil {
			if required {
				return fmt.Errorf("%w: request.%s is required", errUnparseable, key)
			}
			return nil
		}
		m, ok := g.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: request.%s must be an object", errUnparseable, key)
		}
		kept := map[string]any{}
		for _, f := range fields {
			s, ok := m[f].(string)
			if !ok {
				return fmt.Errorf("%w: request.%s.%s must be a string", errUnparseable, key, f)
			}
			kept[f] = s
		}
		out[key] = kept
		return nil
	}
	for _, err := range []error{
		str("uid", true),
		group("kind", true, "group", "version", "kind"),
		group("resource", true, "group", "version", "resource"),
		str("subResource", false),
		group("requestKind", false, "group", "version", "kind"),
		group("requestResource", false, "group", "version", "resource"),
		str("requestSubResource", false),
		str("name", false),
		str("namespace", false),
		str("operation", true),
	} {
		if err != nil {
			return nil, err
		}
	}
	ui, ok := in["userInfo"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: request.userInfo must be an object", errUnparseable)
	}
	kept := map[string]any{}
	for _, f := range []string{"extra", "groups", "uid", "username"} {
		if x, present := ui[f]; present && x != nil {
			kept[f] = x
		}
	}
	out["userInfo"] = kept
	for _, f := range []string{"object", "oldObject", "options"} {
		if x, present := in[f]; present && x != nil {
			out[f] = x
		}
	}
	if x, present := in["dryRun"]; present && x != nil {
		if _, ok := x.(bool); !ok {
			return nil, fmt.Errorf("%w: request.dryRun must be a boolean", errUnparseable)
		}
		out["dryRun"] = x
	}
	return out, nil
}
