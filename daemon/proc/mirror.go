package proc

// MsgStdioToTerminal says why a terminal's child cannot take passed stdio
// (mirror.Spec.Stdin, mirror.Spec.Direct).
const MsgStdioToTerminal = "a terminal's child reads and writes its terminal: its stdio cannot be passed to it"
