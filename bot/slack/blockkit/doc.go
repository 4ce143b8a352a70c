// Package blockkit renders gpubot's platform-neutral replies
// (commands.Reply) as Slack Block Kit, builds the request modal and the
// App Home view, and reads back what Slack sends for them (button
// actions, modal submissions). It is pure: no network, no clock, no
// randomness; the same input always gives the same JSON, so golden files
// are stable. bot/slack calls it; nothing here talks to Slack.
//
// # API
//
//	Message(r) Rendered                        a Reply as a message: text, ≤ 50 blocks, Overflow if cut
//	Home(r) slack.HomeTabViewRequest           a Reply as the App Home tab (≤ 100 blocks)
//	ParseAction(actionID, value) (Action, error)  a pressed button back to a commands.Action
//	RequestForm(o) slack.ModalViewRequest      the /gpu request modal (callback_id RequestFormID)
//	NewFormOptions(defaults, channel)          FormOptions from commands.Service.FormDefaults
//	FormCommand(view, vocab)                   a submitted modal → "request …" text, or errors by block_id
//
// # Messages
//
// Message starts the blocks with Reply.Text as a section, unless the
// reply starts with a header (cards and pages, whose header and status
// say the same); Rendered.Text is Reply.Text too, for notifications. Each
// commands.Block then becomes one or more Slack blocks:
//
//   - header → header block (plain_text, line breaks as spaces, ≤ 150
//     characters).
//   - section text → mrkdwn section; text over 3000 characters is split
//     at line breaks into several sections (nothing is lost).
//   - section fields → section fields "*Label*\nValue" (≤ 2000 characters
//     each), at most ten per section; more fields go into further sections.
//   - table → a monospaced code block (```) with the header, a dashed
//     rule and the rows, columns aligned by character count and two
//     spaces apart; cells wider than 80 characters are cut. A table longer
//     than one section (3000 characters) is paged over several sections,
//     each repeating the header. If it does not fit the room the rest of
//     the message leaves, its last page ends "… N more rows in the
//     attached file" and Overflow carries the whole table.
//   - code → a fenced (```) mrkdwn section, split like section text.
//   - context → a context block with one mrkdwn element.
//   - actions → actions blocks of at most 25 buttons each.
//
// Limits: Rendered.Text ≤ 3000 characters; ≤ 50 blocks (100 in App
// Home); section text ≤ 3000; ≤ 10 fields each ≤ 2000; header ≤ 150;
// button text ≤ 75; action_id ≤ 255; value ≤ 2000; block_id ≤ 255. Slack
// also refuses messages whose blocks hold more than about 13,200
// characters in all (msg_blocks_too_long) although every block is within
// its limits, so a message's blocks hold at most 11,000 bytes of text;
// and the JSON of Text and Blocks stays under 19,000 bytes so that a
// reply may ride a Socket Mode ack (Slack drops acks of 20 KB or more).
// When something must go, actions blocks are kept first (they are what a
// reader acts on), then the other blocks in order while they fit, and
// tables share what room is left. Anything cut — a block, rows, a long
// cell, field, header or button label, the text — sets Rendered.Overflow
// to the whole reply as plain text (Name "gpubot-<headline words>.txt",
// Title the headline), and the last block is a context line naming the
// file. bot/slack uploads it next to the message with the files upload
// flow (files.getUploadURLExternal → files.completeUploadExternal). App
// Home has no file: it ends with a line pointing to /gpu status, usage
// and capacity.
//
// # Escaping
//
// All mrkdwn text — Rendered.Text included — is escaped: &, < and >
// become &amp; &lt; &gt;, so that user text (a reason, a deny reason)
// such as "<!channel>", "<@U123>", "<#C123>" or "<https://x|y>" cannot
// ping, mention or link; invalid UTF-8 becomes U+FFFD; control characters
// other than newline and tab are dropped, and so are the bidirectional
// overrides. Text in code blocks and tables cannot close its fence: a
// zero-width space is put between backticks. Mrkdwn emphasis characters
// (*, _, ~) in user text are left alone; they can change how text looks
// but not notify anyone. plain_text (headers, button labels, form
// labels) is not parsed by Slack and keeps &, < and > as they are.
// bot/slack must post with parse "none" and without link_names (the
// defaults), or Slack would turn a bare "@channel" into a ping.
//
// # Buttons
//
// A button's action_id is "gpubot:<verb>" (e.g. "gpubot:approve"). When a
// verb occurs on more than one button of a message, each of those gets
// ":<n>", n the button's 1-based position among the message's buttons
// ("gpubot:extend:1", "gpubot:extend:2"), since action_ids must be unique
// in a message. The value is "<request>|<arg>" (cut to 2000 bytes).
// ParseAction reverses both and refuses anything else: another prefix
// (ErrNotOurs: another app's button), a verb no button carries, a
// malformed number, a value without "|" or without a request (an error
// saying which, for the answer and the audit log). Style "primary" and "danger" pass through from the
// reply (Approve is primary; Deny, Preempt and Release danger). Preempt,
// Cancel and Release ask for confirmation in a dialog (danger style):
// they take running work or a queue place from someone and cannot be
// undone. Deny does not (a lead's deliberate decision, with a reason).
//
// Every block has a block_id "gpubot-<kind>-<n>-<hash>": n its 1-based
// position, kind one of header, section, fields, table, code, context,
// actions, note, and hash an FNV-32a of the block's content. slack-go
// treats only actions with a block_id as block actions; Slack asks for
// new block_ids when a message is updated, which a changed card gets,
// while the same content always gets the same IDs (goldens are stable).
//
// # Request form
//
// RequestForm builds a modal with callback_id RequestFormID, title
// "Request GPUs", and input blocks whose block_ids (and action_ids) are
// the Form* constants: count (number input, minimum 1), flavor (static
// select, optional: empty tries the team's flavors in order), duration
// (text: 90m, 4h, 2d, 1h 30m), team and priority (static selects,
// preselected), topology (optional static select: host, rack, block) and
// reason (optional, multiline, ≤ 500 characters). A list with no words
// becomes a text input. The channel the form was opened from goes into
// private_metadata. The template is not asked: the first is used.
//
// FormCommand rebuilds the command text in a fixed order —
// "request <count>[x<flavor>] for <duration> team <t> priority <p>
// [topology <l>] [reason "<text>"]" — and parses it with commands.Parse
// and the Vocabulary. A parse error's position is mapped back to the
// field whose words it points at (unknown flavor → flavor; bad duration
// → duration; a count out of range → count). Before that it checks what
// the parser cannot attribute: count a positive whole number, a duration
// that commands.ParseDuration accepts on its own (so that no option
// words can be smuggled in through it), select values that are single
// words, a reason within 500 characters. The reason is quoted so that
// the parser reads it back whole (double quotes, else single, else the
// double quotes inside that would end it early become ″); the parsed
// spec is compared with the form, so a field can never change another.
// Errors are plain sentences keyed by block_id, for
// slack.NewErrorsViewSubmissionResponse.
package blockkit
