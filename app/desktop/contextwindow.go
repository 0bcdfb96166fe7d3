package desktop

import (
	"fmt"

	"dovetail/app/runner"
)

// windowed is a conversation's prompt as it fits the context, and how many
// of its oldest messages it leaves out.
type windowed struct {
	prompt  []int
	dropped int
}

// replyRoom is the room a reply is left when a conversation outgrows the
// context: a quarter of it, or max tokens where that is less.
func replyRoom(ctx, maxTokens int) int {
	room := ctx / 4
	if maxTokens > 0 {
		room = min(room, maxTokens)
	}
	return max(room, 1)
}

// fitContext renders the conversation for m in a context of ctx tokens.
// As LM Studio's rolling window does, it leaves out the oldest messages
// after the system prompt, a turn at a time (to the next message of the
// user's), until the reply has room, keeping at least the last message of
// the user's; stopAtLimit refuses a conversation that does not fit
// instead. Either way a prompt must leave the reply one token.
func fitContext(m *runner.Model, ctx int, system string, msgs []Message, room int, stopAtLimit bool) (windowed, error) {
	for drop := 0; ; {
		ids, err := m.ChatTokens(chatMessages(system, msgs[drop:]))
		if err != nil {
			return windowed{}, err
		}
		if len(ids)+room <= ctx || (stopAtLimit && len(ids) < ctx) {
			return windowed{ids, drop}, nil
		}
		if stopAtLimit {
			return windowed{}, fmt.Errorf("the conversation has %d tokens and the context holds %d: start a new chat, or let the oldest messages make room (System prompt and sampling)", len(ids), ctx)
		}
		next := nextTurn(msgs, drop)
		if next < 0 {
			if len(ids) < ctx {
				return windowed{ids, drop}, nil // what room there is
			}
			return windowed{}, fmt.Errorf("your message takes %d tokens and the context holds %d: shorten it", len(ids), ctx)
		}
		drop = next
	}
}

// nextTurn is where the turn after the one at from begins: the next
// message of the user's, if one follows that is not the last (-1: none).
func nextTurn(msgs []Message, from int) int {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			last = i
			break
		}
	}
	for i := from + 1; i <= last; i++ {
		if msgs[i].Role == "user" {
			return i
		}
	}
	return -1
}

// droppedNote is what a reply's note says of the messages left out.
func droppedNote(n, ctx int) string {
	if n == 1 {
		return fmt.Sprintf("The oldest message no longer fits in the context (%d tokens): this reply did not see it.", ctx)
	}
	return fmt.Sprintf("The %d oldest messages no longer fit in the context (%d tokens): this reply did not see them.", n, ctx)
}

// contextWords is the context meter's text: never more used than there
// is. What a full context means is said where it happens: the reply's
// note, or the error.
func contextWords(used, total int) string {
	if used < total {
		return fmt.Sprintf("Context: %d of %d tokens", used, total)
	}
	return fmt.Sprintf("Context full: %d of %d tokens", total, total)
}
