// Command guest is a small Kubewarden waPC test policy for the CLI tests.
// It lives under testdata so the go tool ignores it; build it with
// `make -C cmd/yunikorn-userinfo/testdata` (TinyGo).
//
// Behaviour, driven by settings:
//   - validate_settings: settings {"reject": "<msg>"} are invalid with that
//     message; anything else is valid.
//   - validate: logs a "guest decision" line (kubewarden/tracing/log) with
//     the request uid, then by settings.mode: "" or "accept" accepts;
//     "reject" rejects with message "rejected by test guest" and code 403;
//     "mutate" adds metadata.labels.mutated="true" to request.object;
//     "fail" returns a guest error; "host-call" calls the Kubernetes host
//     capability settings.operation with settings.payload and accepts with
//     the answer as message, or rejects with "host error: " and the error.
package main

import (
	"encoding/json"
	"errors"

	wapc "github.com/wapc/wapc-guest-tinygo"
)

func main() {
	wapc.RegisterFunctions(wapc.Functions{
		"protocol_version":  func([]byte) ([]byte, error) { return []byte(`"v1"`), nil },
		"validate_settings": validateSettings,
		"validate":          validate,
	})
}

type settings struct {
	Reject    string          `json:"reject"`
	Mode      string          `json:"mode"`
	Operation string          `json:"operation"`
	Payload   json.RawMessage `json:"payload"`
}

func validateSettings(payload []byte) ([]byte, error) {
	var s settings
	if err := json.Unmarshal(payload, &s); err != nil {
		return json.Marshal(map[string]any{"valid": false, "message": "cannot decode settings: " + err.Error()})
	}
	if s.Reject != "" {
		return json.Marshal(map[string]any{"valid": false, "message": s.Reject})
	}
	return []byte(`{"valid":true}`), nil
}

type validationRequest struct {
	Request struct {
		UID    string                     `json:"uid"`
		Object map[string]json.RawMessage `json:"object"`
	} `json:"request"`
	Settings settings `json:"settings"`
}

func validate(payload []byte) ([]byte, error) {
	var vr validationRequest
	if err := json.Unmarshal(payload, &vr); err != nil {
		return nil, errors.New("cannot decode validation request: " + err.Error())
	}
	line, _ := json.Marshal(map[string]string{"level": "info", "message": "guest decision", "uid": vr.Request.UID, "mode": vr.Settings.Mode})
	_, _ = wapc.HostCall("kubewarden", "tracing", "log", line)

	switch vr.Settings.Mode {
	case "", "accept":
		return []byte(`{"accepted":true}`), nil
	case "reject":
		return []byte(`{"accepted":false,"message":"rejected by test guest","code":403}`), nil
	case "mutate":
		obj := vr.Request.Object
		var meta map[string]json.RawMessage
		if raw, ok := obj["metadata"]; ok {
			_ = json.Unmarshal(raw, &meta)
		}
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta["labels"] = json.RawMessage(`{"mutated":"true"}`)
		obj["metadata"], _ = json.Marshal(meta)
		return json.Marshal(map[string]any{"accepted": true, "mutated_object": obj})
	case "fail":
		return nil, errors.New("test guest failure")
	case "host-call":
		answer, err := wapc.HostCall("kubewarden", "kubernetes", vr.Settings.Operation, vr.Settings.Payload)
		if err != nil {
			return json.Marshal(map[string]any{"accepted": false, "message": "host error: " + err.Error()})
		}
		return json.Marshal(map[string]any{"accepted": true, "message": string(answer)})
	default:
		return nil, errors.New("unknown mode " + vr.Settings.Mode)
	}
}
