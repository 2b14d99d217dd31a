// Package budget rewrites a WebAssembly module so that it meters its own
// work: it gains an exported, mutable i64 global (the budget), which every
// loop iteration, and every entry into a function that calls others, takes
// one from; the guest traps (unreachable) once the budget is used up.
//
// The engine uses this instead of wazero's WithCloseOnContextDone, which
// makes compiled code leave native code and enter Go on every loop
// iteration to see whether the module was closed. For a guest that scans
// JSON byte by byte that exit costs more than the scanning itself (about
// 4x on our policy). The inline check here is a decrement, a mask and a
// branch. The host gives each call a budget large enough for any honest
// evaluation, and zeroes the global from a timer when the call's deadline
// passes, so a guest stops at its deadline, and at the latest when the
// budget runs out.
//
// Go cannot preempt native code, and without wazero's exits a guest loop
// would keep its CPU from the Go scheduler: with every CPU busy in guest
// code, the timer that zeroes the budget would never run. So every
// YieldEvery decrements the check also runs memory.grow(0), which wazero
// implements as a call into Go: a point where the scheduler can take the
// CPU back. The module must therefore have a memory (every waPC guest has
// one).
//
// Only the instruction set that compilers such as TinyGo, Rust and
// Clang emit by default is understood: the MVP plus sign extension,
// saturating conversions, bulk memory, reference types, multi-value and
// tail calls. A module using anything else (SIMD, exceptions, threads,
// GC types) is refused with ErrUnsupported, and the caller runs it
// unmodified with wazero's own checks instead.
package budget

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/yunikorn-userinfo/userinfo/host/internal/leb128"
)

// Export is the name under which the budget global is exported.
const Export = "__yunikorn_userinfo_budget"

// YieldEvery is how many decrements of the budget pass between two yields
// to the Go scheduler: a power of two, since the check is a mask. A budget
// zeroed from outside is noticed at the next yield.
const YieldEvery = 1 << 16

// Initial is the budget the global starts with, before the host sets one:
// what a module's start function (which runs while the module is
// instantiated) may spend.
const Initial = 1 << 31

// ErrUnsupported means the module uses something this package does not
// rewrite. The module itself may well be valid.
var ErrUnsupported = errors.New("module not supported by the budget instrumentation")

// Section ids, and the order in which sections must appear.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionRank orders the non-custom sections as the binary format requires.
var sectionRank = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11, secCode: 12, secData: 13,
}

type section struct {
	id      byte
	payload []byte
}

// Instrument returns a copy of wasm with the budget global and checks
// added. wasm is not modified.
func Instrument(wasm []byte) ([]byte, error) {
	sections, err := splitSections(wasm)
	if err != nil {
		return nil, err
	}
	importedGlobals := 0
	globals := 0
	memories := 0
	for _, s := range sections {
		switch s.id {
		case secImport:
			var importedMemories int
			if importedGlobals, importedMemories, err = countImports(s.payload); err != nil {
				return nil, fmt.Errorf("read import section: %w", err)
			}
			memories += importedMemories
		case secMemory:
			r := reader{b: s.payload}
			n, err := r.u32()
			if err != nil {
				return nil, fmt.Errorf("read memory section: %w", err)
			}
			memories += int(n)
		case secGlobal:
			r := reader{b: s.payload}
			n, err := r.u32()
			if err != nil {
				return nil, fmt.Errorf("read global section: %w", err)
			}
			globals = int(n)
		case secTag:
			return nil, fmt.Errorf("%w: exception tags", ErrUnsupported)
		}
	}
	if memories == 0 {
		return nil, fmt.Errorf("%w: no memory to yield with", ErrUnsupported)
	}
	global := uint32(importedGlobals + globals)
	check := checkCode(global)

	haveGlobal, haveExport := false, false
	out := make([]section, 0, len(sections)+2)
	for _, s := range sections {
		switch s.id {
		case secGlobal:
			s.payload, err = appendGlobal(s.payload)
			haveGlobal = true
		case secExport:
			s.payload, err = appendExport(s.payload, global)
			haveExport = true
		case secCode:
			s.payload, err = instrumentCode(s.payload, check)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if !haveGlobal {
		payload, _ := appendGlobal([]byte{0})
		out = insertSection(out, section{id: secGlobal, payload: payload})
	}
	if !haveExport {
		payload, _ := appendExport([]byte{0}, global)
		out = insertSection(out, section{id: secExport, payload: payload})
	}

	var b bytes.Buffer
	b.Grow(len(wasm) + len(wasm)/8)
	b.Write(wasm[:8])
	for _, s := range out {
		b.WriteByte(s.id)
		b.Write(leb128.AppendU32(nil, uint32(len(s.payload))))
		b.Write(s.payload)
	}
	return b.Bytes(), nil
}

// checkCode is what runs at every loop header, and at the entry of every
// function that calls others:
//
//	global.get $budget
//	i64.const 1
//	i64.sub
//	global.set $budget
//	global.get $budget
//	i64.const YieldEvery-1
//	i64.and
//	i64.eqz
//	if                      ;; once every YieldEvery decrements
//	  global.get $budget
//	  i64.const 0
//	  i64.le_s
//	  if
//	    unreachable         ;; used up, or zeroed by the host
//	  end
//	  i32.const 0
//	  memory.grow 0         ;; a call into Go: the scheduler's chance
//	  drop
//	end
//
// The common path is a decrement, a mask and a branch. A budget the host
// zeroes goes negative and traps at the next multiple of YieldEvery, at
// most YieldEvery decrements later.
func checkCode(global uint32) []byte {
	get := append([]byte{0x23}, leb128.AppendU32(nil, global)...)
	set := append([]byte{0x24}, leb128.AppendU32(nil, global)...)
	var c []byte
	c = append(append(c, get...), 0x42, 0x01, 0x7d)
	c = append(append(c, set...), get...)
	c = append(append(c, 0x42), leb128.AppendS64(nil, YieldEvery-1)...)
	c = append(c, 0x83, 0x50, 0x04, 0x40)
	c = append(append(c, get...), 0x42, 0x00, 0x57, 0x04, 0x40, 0x00, 0x0b)
	return append(c, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b)
}

func splitSections(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, errors.New("not a WebAssembly binary")
	}
	if !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, fmt.Errorf("%w: binary format version %x", ErrUnsupported, wasm[4:8])
	}
	r := reader{b: wasm, off: 8}
	var sections []section
	for r.off < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		n, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("read size of section %d: %w", id, err)
		}
		payload, err := r.bytes(int(n))
		if err != nil {
			return nil, fmt.Errorf("read section %d: %w", id, err)
		}
		if id != secCustom {
			if _, ok := sectionRank[id]; !ok {
				return nil, fmt.Errorf("%w: section id %d", ErrUnsupported, id)
			}
		}
		sections = append(sections, section{id: id, payload: payload})
	}
	return sections, nil
}

// insertSection puts s before the first non-custom section that must come
// after it.
func insertSection(sections []section, s section) []section {
	rank := sectionRank[s.id]
	for i, t := range sections {
		if t.id != secCustom && sectionRank[t.id] > rank {
			return append(sections[:i], append([]section{s}, sections[i:]...)...)
		}
	}
	return append(sections, s)
}

// countImports counts the imported globals and memories.
func countImports(payload []byte) (globals, memories int, err error) {
	r := reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return 0, 0, err
	}
	for range n {
		for range 2 { // module and field names
			l, err := r.u32()
			if err != nil {
				return 0, 0, err
			}
			if _, err := r.bytes(int(l)); err != nil {
				return 0, 0, err
			}
		}
		kind, err := r.byte()
		if err != nil {
			return 0, 0, err
		}
		switch kind {
		case 0x00: // func: type index
			_, err = r.u32()
		case 0x01: // table: reftype, limits
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case 0x02: // memory: limits
			memories++
			err = r.limits()
		case 0x03: // global: valtype, mutability
			globals++
			if _, err = r.byte(); err == nil {
				_, err = r.byte()
			}
		default:
			return 0, 0, fmt.Errorf("%w: import kind %#x", ErrUnsupported, kind)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return globals, memories, nil
}

// appendGlobal adds `(global (mut i64) (i64.const Initial))` to a global
// section.
func appendGlobal(payload []byte) ([]byte, error) {
	r := reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("read global section: %w", err)
	}
	out := leb128.AppendU32(nil, n+1)
	out = append(out, payload[r.off:]...)
	out = append(out, 0x7e, 0x01, 0x42)
	out = leb128.AppendS64(out, Initial)
	return append(out, 0x0b), nil
}

// appendExport adds the budget global's export to an export section.
func appendExport(payload []byte, global uint32) ([]byte, error) {
	r := reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("read export section: %w", err)
	}
	out := leb128.AppendU32(nil, n+1)
	out = append(out, payload[r.off:]...)
	out = leb128.AppendU32(out, uint32(len(Export)))
	out = append(out, Export...)
	out = append(out, 0x03)
	return leb128.AppendU32(out, global), nil
}

func instrumentCode(payload []byte, check []byte) ([]byte, error) {
	r := reader{b: payload}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("read code section: %w", err)
	}
	out := make([]byte, 0, len(payload)+len(payload)/4)
	out = leb128.AppendU32(out, n)
	var body []byte
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("read size of function body %d: %w", i, err)
		}
		code, err := r.bytes(int(size))
		if err != nil {
			return nil, fmt.Errorf("read function body %d: %w", i, err)
		}
		body, err = instrumentBody(body[:0], code, check)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = leb128.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.off != len(r.b) {
		return nil, errors.New("read code section: trailing bytes")
	}
	return out, nil
}

// instrumentBody copies one function body to out, with check after the
// local declarations and after every loop instruction.
func instrumentBody(out, code, check []byte) ([]byte, error) {
	r := reader{b: code}
	groups, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("read locals: %w", err)
	}
	for range groups {
		if _, err := r.u32(); err != nil {
			return nil, fmt.Errorf("read locals: %w", err)
		}
		if err := r.valtype(); err != nil {
			return nil, fmt.Errorf("read locals: %w", err)
		}
	}
	out = append(out, code[:r.off]...)
	calls, err := containsCall(code[r.off:])
	if err != nil {
		return nil, err
	}
	if calls {
		// A function that calls others could, through them, run without
		// ever looping (recursion, or a call tree that doubles at every
		// level): count its entries. A leaf runs straight-line code
		// between loop headers and needs no check of its own.
		out = append(out, check...)
	}

	depth := 0
	for {
		start := r.off
		op, err := r.byte()
		if err != nil {
			return nil, fmt.Errorf("read instruction at %d: %w", start, err)
		}
		if err := r.skipImmediates(op); err != nil {
			return nil, fmt.Errorf("instruction %#x at %d: %w", op, start, err)
		}
		out = append(out, code[start:r.off]...)
		switch op {
		case 0x02, 0x04: // block, if
			depth++
		case 0x03: // loop: the check runs on entry and on every branch back
			depth++
			out = append(out, check...)
		case 0x0b: // end
			if depth == 0 {
				if r.off != len(code) {
					return nil, errors.New("bytes after the end of the function")
				}
				return out, nil
			}
			depth--
		}
	}
}

// containsCall reports whether the instructions in code call a function.
func containsCall(code []byte) (bool, error) {
	r := reader{b: code}
	for r.off < len(r.b) {
		start := r.off
		op, err := r.byte()
		if err != nil {
			return false, err
		}
		if op >= 0x10 && op <= 0x13 { // call, call_indirect, return_call, return_call_indirect
			return true, nil
		}
		if err := r.skipImmediates(op); err != nil {
			return false, fmt.Errorf("instruction %#x at %d: %w", op, start, err)
		}
	}
	return false, nil
}

// skipImmediates advances past the immediates of op.
func (r *reader) skipImmediates(op byte) error {
	var err error
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f ||
		op == 0x1a || op == 0x1b || op == 0xd1 || (op >= 0x45 && op <= 0xc4):
		// no immediates: unreachable, nop, else, end, return, drop,
		// select, ref.is_null, numeric and conversion instructions
	case op >= 0x02 && op <= 0x04: // block, loop, if
		err = r.blocktype()
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || // br, br_if, call, return_call
		(op >= 0x20 && op <= 0x26) || // local.*, global.*, table.get/set
		op == 0x3f || op == 0x40 || op == 0xd2: // memory.size/grow, ref.func
		_, err = r.u32()
	case op == 0x0e: // br_table
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i <= n && err == nil; i++ {
				_, err = r.u32()
			}
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1c: // select with types
		var n uint32
		if n, err = r.u32(); err == nil {
			for i := uint32(0); i < n && err == nil; i++ {
				err = r.valtype()
			}
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		err = r.memarg()
	case op == 0x41: // i32.const
		err = r.sleb(32)
	case op == 0x42: // i64.const
		err = r.sleb(64)
	case op == 0x43: // f32.const
		_, err = r.bytes(4)
	case op == 0x44: // f64.const
		_, err = r.bytes(8)
	case op == 0xd0: // ref.null
		err = r.heaptype()
	case op == 0xfc:
		err = r.skipFC()
	default:
		return fmt.Errorf("%w: opcode %#x", ErrUnsupported, op)
	}
	return err
}

// skipFC advances past a 0xfc-prefixed instruction: saturating
// conversions, bulk memory and table instructions.
func (r *reader) skipFC() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	immediates := 0
	switch {
	case sub <= 7: // trunc_sat
	case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17): // data.drop, memory.fill, elem.drop, table.grow/size/fill
		immediates = 1
	case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
		immediates = 2
	default:
		return fmt.Errorf("%w: opcode 0xfc %d", ErrUnsupported, sub)
	}
	for range immediates {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// reader decodes the binary format.
type reader struct {
	b   []byte
	off int
}

var errEOF = errors.New("unexpected end of module")

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, errEOF
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	v, n, err := leb128.DecodeU32(r.b[r.off:])
	if err != nil {
		return 0, err
	}
	r.off += n
	return v, nil
}

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits int) error {
	for n := 0; n < (bits+6)/7; n++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return errors.New("integer too long")
}

func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 1 {
		return fmt.Errorf("%w: limits flags %#x (shared or 64-bit memory)", ErrUnsupported, flags)
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flags == 1 {
		_, err = r.u32()
	}
	return err
}

func (r *reader) memarg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		return fmt.Errorf("%w: multiple memories", ErrUnsupported)
	}
	_, err = r.u32()
	return err
}

// valtype accepts the number types and the two MVP reference types.
func (r *reader) valtype() error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x70, 0x6f:
		return nil
	}
	return fmt.Errorf("%w: value type %#x", ErrUnsupported, t)
}

func (r *reader) heaptype() error {
	t, err := r.byte()
	if err != nil {
		return err
	}
	if t == 0x70 || t == 0x6f {
		return nil
	}
	return fmt.Errorf("%w: heap type %#x", ErrUnsupported, t)
}

// blocktype reads an empty type, a value type or a type index (s33).
func (r *reader) blocktype() error {
	if r.off >= len(r.b) {
		return errEOF
	}
	switch r.b[r.off] {
	case 0x40:
		r.off++
		return nil
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x70, 0x6f:
		r.off++
		return nil
	}
	if r.b[r.off]&0x40 != 0 && r.b[r.off]&0x80 == 0 {
		// A one-byte negative s33 that is not a type we know: SIMD or GC.
		return fmt.Errorf("%w: block type %#x", ErrUnsupported, r.b[r.off])
	}
	return r.sleb(33)
}
