// Package jsonx is the JSON reading that the policy and the host's tools
// share beyond policy/jsontext's strings: field paths for messages, the
// error that names a malformed field, member lookup that refuses a
// duplicated key, and settings objects read member by member. It works on
// raw JSON through gjson, without reflection, for the policy module
// (TinyGo).
package jsonx
