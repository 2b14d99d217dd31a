package main

import (
	"github.com/kubewarden/policy-sdk-go/constants"
)

// The waPC operations the module exports, as Kubewarden calls them.
const (
	opValidate         = "validate"
	opValidateSettings = "validate_settings"
	opProtocolVersion  = "protocol_version"
)

// dispatch runs the waPC operation op on payload and appends its answer to
// dst. Only an unknown operation is an error: every payload of a known one
// gets an answer (see validate).
func dispatch(dst []byte, op string, payload []byte) ([]byte, error) {
	switch op {
	case opValidate:
		return appendValidate(dst, payload), nil
	case opValidateSettings:
		out, err := validateSettings(payload)
		return append(dst, out...), err
	case opProtocolVersion:
		// What policy-sdk-go's protocol package answers: the version as a
		// JSON string.
		return appendJSONString(dst, constants.ProtocolVersion), nil
	}
	return dst, unknownOperation(op)
}

type unknownOperation string

func (e unknownOperation) Error() string { return `Could not find function "` + string(e) + `"` }
