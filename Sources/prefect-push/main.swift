import Relay

// The executable is only this; the relay lives in the Relay module (so tests and tools link the same code).
RelayMain.launch()
