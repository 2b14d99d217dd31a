package main

import (
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

// The policy's short names for the JSON text helpers it uses everywhere;
// policy/jsontext holds them, shared with the host-side tools.

func appendJSONString(dst []byte, s string) []byte { return jsontext.AppendString(dst, s) }
func jsonStringLen(s string) int                   { return jsontext.StringLen(s) }
func quote(s string) string                        { return jsontext.Quote(s) }
func str(v gjson.Result) string                    { return jsontext.Str(v) }

// The field-path and member helpers policy/jsonx holds, shared with the
// host-side tools.

func malformed(field, what string) error    { return jsonx.Malformed(field, what) }
func present(v gjson.Result) bool           { return jsonx.Present(v) }
func isObject(v gjson.Result) bool          { return jsonx.IsObject(v) }
func typeName(v gjson.Result) string        { return jsontext.TypeName(v) }
func join(field, key string) string         { return jsonx.Join(field, key) }
func describe(v gjson.Result) string        { return jsonx.Describe(v) }
func indexField(field string, i int) string { return jsonx.IndexField(field, i) }
