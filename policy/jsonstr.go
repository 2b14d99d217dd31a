package main

import (
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

// The policy's short names for jsonx, which the host's tools share.

func appendJSONString(dst []byte, s string) []byte { return jsonx.AppendString(dst, s) }
func jsonStringLen(s string) int                   { return jsonx.StringLen(s) }
func quote(s string) string                        { return jsonx.Quote(s) }
func str(v gjson.Result) string                    { return jsonx.Str(v) }
func decodeJSONString(s string) string             { return jsonx.DecodeString(s) }
func malformed(field, what string) error           { return jsonx.Malformed(field, what) }
func present(v gjson.Result) bool                  { return jsonx.Present(v) }
func isObject(v gjson.Result) bool                 { return jsonx.IsObject(v) }
func typeName(v gjson.Result) string               { return jsonx.TypeName(v) }
func join(field, key string) string                { return jsonx.Join(field, key) }
func describe(v gjson.Result) string               { return jsonx.Describe(v) }
func indexField(field string, i int) string        { return jsonx.IndexField(field, i) }
