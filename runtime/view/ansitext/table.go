package ansitext

import "sync"

// The parser's states and actions: x/ansi/parser's, in the same order
// (https://vt100.net/emu/dec_ansi_parser, plus a state for UTF-8).
type (
	state  = byte
	action = byte
)

const (
	groundState state = iota
	csiEntryState
	csiIntermediateState
	csiParamState
	dcsEntryState
	dcsIntermediateState
	dcsParamState
	dcsStringState
	escapeState
	escapeIntermediateState
	oscStringState
	sosStringState
	pmStringState
	apcStringState
	utf8State
)

const (
	noneAction action = iota
	clearAction
	collectAction
	prefixAction
	dispatchAction
	executeAction
	startAction
	putAction
	paramAction
	printAction

	ignoreAction = noneAction
)

// A transition is indexed by state<<8 | byte and holds action<<4 | next
// state.
const (
	actionShift = 4
	stateMask   = 15
	stateShift  = 8
	tableSize   = 4096
)

type transitionTable []byte

// table is built on first use, not at package init: see the package doc.
var table = sync.OnceValue(generateTransitionTable)

func (t transitionTable) transition(s state, code byte) (state, action) {
	v := t[int(s)<<stateShift|int(code)]
	return v & stateMask, v >> actionShift
}

func (t transitionTable) setDefault(a action, s state) {
	for i := range t {
		t[i] = a<<actionShift | s
	}
}

func (t transitionTable) addOne(code byte, s state, a action, next state) {
	t[int(s)<<stateShift|int(code)] = a<<actionShift | next
}

func (t transitionTable) addMany(codes []byte, s state, a action, next state) {
	for _, code := range codes {
		t.addOne(code, s, a, next)
	}
}

func (t transitionTable) addRange(start, end byte, s state, a action, next state) {
	for i := int(start); i <= int(end); i++ {
		t.addOne(byte(i), s, a, next)
	}
}

// generateTransitionTable is x/ansi/parser's GenerateTransitionTable: the
// VT500 parser with its changes (a UTF-8 state, OSC and DCS strings that
// take UTF-8, ':' kept in parameters, SOS/PM/APC dispatched, DEL executed
// in the ground state and collected in a DCS string, ST executed).
func generateTransitionTable() transitionTable {
	t := make(transitionTable, tableSize)
	t.setDefault(noneAction, groundState)

	// Anywhere
	for s := groundState; s <= utf8State; s++ {
		t.addMany([]byte{0x18, 0x1a, 0x99, 0x9a}, s, executeAction, groundState)
		t.addRange(0x80, 0x8F, s, executeAction, groundState)
		t.addRange(0x90, 0x97, s, executeAction, groundState)
		t.addOne(0x9C, s, executeAction, groundState)
		t.addOne(0x1B, s, clearAction, escapeState)
		t.addOne(0x98, s, startAction, sosStringState)
		t.addOne(0x9E, s, startAction, pmStringState)
		t.addOne(0x9F, s, startAction, apcStringState)
		t.addOne(0x9B, s, clearAction, csiEntryState)
		t.addOne(0x90, s, clearAction, dcsEntryState)
		t.addOne(0x9D, s, startAction, oscStringState)
		t.addRange(0xC2, 0xDF, s, collectAction, utf8State)
		t.addRange(0xE0, 0xEF, s, collectAction, utf8State)
		t.addRange(0xF0, 0xF4, s, collectAction, utf8State)
	}

	// Ground
	t.addRange(0x00, 0x17, groundState, executeAction, groundState)
	t.addOne(0x19, groundState, executeAction, groundState)
	t.addRange(0x1C, 0x1F, groundState, executeAction, groundState)
	t.addRange(0x20, 0x7E, groundState, printAction, groundState)
	t.addOne(0x7F, groundState, executeAction, groundState)

	// EscapeIntermediate
	t.addRange(0x00, 0x17, escapeIntermediateState, executeAction, escapeIntermediateState)
	t.addOne(0x19, escapeIntermediateState, executeAction, escapeIntermediateState)
	t.addRange(0x1C, 0x1F, escapeIntermediateState, executeAction, escapeIntermediateState)
	t.addRange(0x20, 0x2F, escapeIntermediateState, collectAction, escapeIntermediateState)
	t.addOne(0x7F, escapeIntermediateState, ignoreAction, escapeIntermediateState)
	t.addRange(0x30, 0x7E, escapeIntermediateState, dispatchAction, groundState)

	// Escape
	t.addRange(0x00, 0x17, escapeState, executeAction, escapeState)
	t.addOne(0x19, escapeState, executeAction, escapeState)
	t.addRange(0x1C, 0x1F, escapeState, executeAction, escapeState)
	t.addOne(0x7F, escapeState, ignoreAction, escapeState)
	t.addRange(0x30, 0x4F, escapeState, dispatchAction, groundState)
	t.addRange(0x51, 0x57, escapeState, dispatchAction, groundState)
	t.addOne(0x59, escapeState, dispatchAction, groundState)
	t.addOne(0x5A, escapeState, dispatchAction, groundState)
	t.addOne(0x5C, escapeState, dispatchAction, groundState)
	t.addRange(0x60, 0x7E, escapeState, dispatchAction, groundState)
	t.addRange(0x20, 0x2F, escapeState, collectAction, escapeIntermediateState)
	t.addOne('X', escapeState, startAction, sosStringState)
	t.addOne('^', escapeState, startAction, pmStringState)
	t.addOne('_', escapeState, startAction, apcStringState)
	t.addOne('P', escapeState, clearAction, dcsEntryState)
	t.addOne('[', escapeState, clearAction, csiEntryState)
	t.addOne(']', escapeState, startAction, oscStringState)

	// SOS, PM and APC strings: ESC, ST, CAN and SUB end them.
	for s := sosStringState; s <= apcStringState; s++ {
		t.addRange(0x00, 0x17, s, putAction, s)
		t.addOne(0x19, s, putAction, s)
		t.addRange(0x1C, 0x1F, s, putAction, s)
		t.addRange(0x20, 0x7F, s, putAction, s)
		t.addOne(0x1B, s, dispatchAction, escapeState)
		t.addOne(0x9C, s, dispatchAction, groundState)
		t.addMany([]byte{0x18, 0x1A}, s, ignoreAction, groundState)
	}

	// DCS entry
	t.addRange(0x00, 0x07, dcsEntryState, ignoreAction, dcsEntryState)
	t.addRange(0x0E, 0x17, dcsEntryState, ignoreAction, dcsEntryState)
	t.addOne(0x19, dcsEntryState, ignoreAction, dcsEntryState)
	t.addRange(0x1C, 0x1F, dcsEntryState, ignoreAction, dcsEntryState)
	t.addOne(0x7F, dcsEntryState, ignoreAction, dcsEntryState)
	t.addRange(0x20, 0x2F, dcsEntryState, collectAction, dcsIntermediateState)
	t.addRange(0x30, 0x3B, dcsEntryState, paramAction, dcsParamState)
	t.addRange(0x3C, 0x3F, dcsEntryState, prefixAction, dcsParamState)
	t.addRange(0x08, 0x0D, dcsEntryState, putAction, dcsStringState)
	t.addOne(0x1B, dcsEntryState, putAction, dcsStringState)
	t.addRange(0x40, 0x7E, dcsEntryState, startAction, dcsStringState)

	// DCS intermediate
	t.addRange(0x00, 0x17, dcsIntermediateState, ignoreAction, dcsIntermediateState)
	t.addOne(0x19, dcsIntermediateState, ignoreAction, dcsIntermediateState)
	t.addRange(0x1C, 0x1F, dcsIntermediateState, ignoreAction, dcsIntermediateState)
	t.addRange(0x20, 0x2F, dcsIntermediateState, collectAction, dcsIntermediateState)
	t.addOne(0x7F, dcsIntermediateState, ignoreAction, dcsIntermediateState)
	t.addRange(0x30, 0x3F, dcsIntermediateState, startAction, dcsStringState)
	t.addRange(0x40, 0x7E, dcsIntermediateState, startAction, dcsStringState)

	// DCS parameters
	t.addRange(0x00, 0x17, dcsParamState, ignoreAction, dcsParamState)
	t.addOne(0x19, dcsParamState, ignoreAction, dcsParamState)
	t.addRange(0x1C, 0x1F, dcsParamState, ignoreAction, dcsParamState)
	t.addRange(0x30, 0x3B, dcsParamState, paramAction, dcsParamState)
	t.addOne(0x7F, dcsParamState, ignoreAction, dcsParamState)
	t.addRange(0x3C, 0x3F, dcsParamState, ignoreAction, dcsParamState)
	t.addRange(0x20, 0x2F, dcsParamState, collectAction, dcsIntermediateState)
	t.addRange(0x40, 0x7E, dcsParamState, startAction, dcsStringState)

	// DCS string: ST, CAN, SUB and ESC end it.
	t.addRange(0x00, 0x17, dcsStringState, putAction, dcsStringState)
	t.addOne(0x19, dcsStringState, putAction, dcsStringState)
	t.addRange(0x1C, 0x1F, dcsStringState, putAction, dcsStringState)
	t.addRange(0x20, 0x7E, dcsStringState, putAction, dcsStringState)
	t.addOne(0x7F, dcsStringState, putAction, dcsStringState)
	t.addRange(0x80, 0xFF, dcsStringState, putAction, dcsStringState)
	t.addOne(0x1B, dcsStringState, dispatchAction, escapeState)
	t.addOne(0x9C, dcsStringState, dispatchAction, groundState)
	t.addMany([]byte{0x18, 0x1A}, dcsStringState, ignoreAction, groundState)

	// CSI parameters
	t.addRange(0x00, 0x17, csiParamState, executeAction, csiParamState)
	t.addOne(0x19, csiParamState, executeAction, csiParamState)
	t.addRange(0x1C, 0x1F, csiParamState, executeAction, csiParamState)
	t.addRange(0x30, 0x3B, csiParamState, paramAction, csiParamState)
	t.addOne(0x7F, csiParamState, ignoreAction, csiParamState)
	t.addRange(0x3C, 0x3F, csiParamState, ignoreAction, csiParamState)
	t.addRange(0x40, 0x7E, csiParamState, dispatchAction, groundState)
	t.addRange(0x20, 0x2F, csiParamState, collectAction, csiIntermediateState)

	// CSI intermediate
	t.addRange(0x00, 0x17, csiIntermediateState, executeAction, csiIntermediateState)
	t.addOne(0x19, csiIntermediateState, executeAction, csiIntermediateState)
	t.addRange(0x1C, 0x1F, csiIntermediateState, executeAction, csiIntermediateState)
	t.addRange(0x20, 0x2F, csiIntermediateState, collectAction, csiIntermediateState)
	t.addOne(0x7F, csiIntermediateState, ignoreAction, csiIntermediateState)
	t.addRange(0x40, 0x7E, csiIntermediateState, dispatchAction, groundState)
	t.addRange(0x30, 0x3F, csiIntermediateState, ignoreAction, groundState)

	// CSI entry
	t.addRange(0x00, 0x17, csiEntryState, executeAction, csiEntryState)
	t.addOne(0x19, csiEntryState, executeAction, csiEntryState)
	t.addRange(0x1C, 0x1F, csiEntryState, executeAction, csiEntryState)
	t.addOne(0x7F, csiEntryState, ignoreAction, csiEntryState)
	t.addRange(0x40, 0x7E, csiEntryState, dispatchAction, groundState)
	t.addRange(0x20, 0x2F, csiEntryState, collectAction, csiIntermediateState)
	t.addRange(0x30, 0x3B, csiEntryState, paramAction, csiParamState)
	t.addRange(0x3C, 0x3F, csiEntryState, prefixAction, csiParamState)

	// OSC string: ST, CAN, SUB, ESC and BEL end it.
	t.addRange(0x00, 0x06, oscStringState, ignoreAction, oscStringState)
	t.addRange(0x08, 0x17, oscStringState, ignoreAction, oscStringState)
	t.addOne(0x19, oscStringState, ignoreAction, oscStringState)
	t.addRange(0x1C, 0x1F, oscStringState, ignoreAction, oscStringState)
	t.addRange(0x20, 0xFF, oscStringState, putAction, oscStringState)
	t.addOne(0x1B, oscStringState, dispatchAction, escapeState)
	t.addOne(0x07, oscStringState, dispatchAction, groundState)
	t.addOne(0x9C, oscStringState, dispatchAction, groundState)
	t.addMany([]byte{0x18, 0x1A}, oscStringState, ignoreAction, groundState)

	return t
}
