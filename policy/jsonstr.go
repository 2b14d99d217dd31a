package main

import (
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
)

// The policy's short names for the JSON text helpers it uses everywhere;
// policy/jsontext holds them, shared with the host-side tools.

func appendJSONString(dst []byte, s string) []byte { return jsontext.AppendString(dst, s) }
func jsonStringLen(s string) int                   { return jsontext.StringLen(s) }
func quote(s string) string                        { return jsontext.Quote(s) }
func str(v gjson.Result) string                    { return jsontext.Str(v) }
