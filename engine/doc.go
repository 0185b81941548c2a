// Package engine defines the StateMachine the bus replicates and a
// reference price-time-priority matching engine that implements it.
//
// The bus sees only bytes: a command is a fixed CommandHeader (session,
// client order id) followed by an opaque body, and an output is a payload
// addressed to a session or to the market-data stream (MarketData, 0). The
// bus parses headers with ParseCommand and never imports the order types.
//
// The Engine is pure and deterministic: no clocks, randomness, goroutines
// or map iteration. All memory (order and level pools, the order-id and
// session indexes, the dedup table) is allocated by New from Config, so
// Apply does not allocate. Everything replicated (books, dedup table,
// order/trade/market-data counters, AppliedSeq) is covered by StateHash and
// written by Snapshot.
//
// Matching rules: an incoming order trades with the best opposite price
// first and, at one price, with the oldest order first; every fill is at
// the resting order's price; a limit order's remainder rests, a market
// order's remainder is cancelled. Self-trades are not prevented.
//
// Usage contract:
//
//  1. Every replica calls New with the same Config (or Restores a snapshot
//     taken with it; Restore refuses another config).
//  2. The bus calls Apply with strictly increasing seq numbers, from one
//     goroutine, in the same order on every replica. Apply never fails;
//     a seq that does not increase is a bug and panics.
//  3. The Emitter copies each payload before returning; the engine reuses
//     its buffer for the next output. Outputs of one command arrive in the
//     order documented on Engine.Apply.
//  4. Clients number their commands per session with increasing client
//     order ids starting at 1 and keep at most Config.DedupWindow of them
//     unacknowledged. A resend of an applied command is answered with
//     KindDuplicate carrying the original result and is not re-applied.
//  5. To check replicas, compare (AppliedSeq, StateHash) pairs. To move a
//     replica, Snapshot on one and Restore on the other; the snapshot
//     records AppliedSeq, from which the bus resumes.
//
// A minimal loop:
//
//	e, _ := engine.New(engine.DefaultConfig())
//	for seq, cmd := range sequenced {           // cmd from engine.AppendRequest
//		e.Apply(seq, cmd, gate)                  // gate implements Emitter
//	}
//	fmt.Println(e.AppliedSeq(), e.StateHash())
package engine
