// Package slackfake is a fake Slack for tests: one local HTTP server that speaks
// Slack's real Socket Mode and Web API wire protocol, so a Slack adapter can be
// tested end to end through the real slack-go client (github.com/slack-go/slack
// and its socketmode package) without a workspace.
//
// It is an ordinary package (not a _test file) so the tests of several packages
// can share it. It imports nothing from the rest of gpubot.
//
// # Basics
//
//	s := slackfake.Start(t)                 // New + t.Cleanup(s.Close) + log to t
//	api := slack.New(slackfake.BotToken,
//		slack.OptionAPIURL(s.APIURL()),
//		slack.OptionAppLevelToken(slackfake.AppToken))
//	client := socketmode.New(api)
//	go client.RunContext(ctx)               // and read client.Events promptly
//
//	env := s.SlashCommand("U0ALICE", "C0GPU", "request 4xh100 2h")
//	ack, err := s.WaitAck(ctx, env)         // the bot acked within Slack's 3 s?
//	err = s.WaitFor(ctx, func() bool { return len(s.Messages("C0GPU")) == 1 })
//	msg := s.Messages("C0GPU")[0]           // Text, Blocks (raw JSON), TS, edits
//
// Only [BotToken] (Web API) and [AppToken] (apps.connections.open) are accepted;
// any other token gets {"ok":false,"error":"invalid_auth"}, none gets not_authed,
// and the wrong kind of valid token gets not_allowed_token_type, as Slack answers.
//
// # Driving the bot
//
// [Server.SlashCommand], [Server.ClickButton], [Server.ClickViewButton],
// [Server.SubmitView] and [Server.AppHomeOpened] build the payloads Slack sends
// (slash_commands; interactive block_actions and view_submission; events_api
// app_home_opened), wrap them in a Socket Mode envelope and deliver it to one
// connected socket (round robin when there are several), waiting up to
// [WithDeliveryTimeout] (default 5 s) for one to connect. Each returns the
// envelope_id; [Server.WaitAck] waits for the bot's ack. [Server.Redeliver]
// sends an envelope again, same envelope_id, with retry_attempt and
// retry_reason set; [Server.RedeliverAsNew] sends its payload under a new
// envelope_id (Slack has been seen doing both: deduplicate on the payload). [Server.Disconnect] sends Slack's {"type":"disconnect"}
// message, delivers nothing more on the old socket and closes it once the
// client has reconnected (or after 10 s); [Server.DropConnections] cuts every
// socket abruptly. [Server.DisconnectThen] sends the disconnect message and,
// right after it on the same old socket, the given envelopes (a client that
// closes the old socket at once loses them). [Server.SendRaw] delivers an
// envelope put together by hand ([RawEnvelope]: any type, any payload, for
// the malformed input a bot must survive); [Server.SendFrame] writes any
// frame at all; [Server.SlashCommandEnvelope] builds a slash command's
// envelope without sending it. A disconnected socket is closed with a close
// frame, as Slack does. Sockets get a hello first and a WebSocket ping every
// second ([WithPingInterval]).
//
// Trigger IDs and response URLs handed out in payloads are real on the fake:
// views.open and views.push accept a trigger_id for 3 s ([WithTriggerTTL]) and
// answer expired_trigger_id after that, invalid_trigger_id for one never
// issued. A response_url accepts 5 posts within 30 minutes; errors are answered
// as Slack's webhooks answer them, an HTTP 4xx with the code as a text body
// (404 used_url / expired_url, 400 invalid_blocks, no_text, msg_too_long, ...),
// so slack-go returns a slack.StatusCodeError and [ResponsePost].Error has the
// code. replace_original and delete_original act on the message the button was
// on; otherwise a post is ephemeral unless "response_type":"in_channel".
//
// An ack's payload is applied as Slack would: for a slash command, a payload with
// text or blocks becomes an ephemeral message to the user (or, with
// "response_type":"in_channel", a message in the channel); for a view
// submission a "response_action" of update or push is recorded as a [View].
//
// # Web API
//
// Implemented methods, accepting both encodings Slack accepts (form with token=,
// or JSON with Authorization: Bearer; slack-go uses form for chat.*,
// conversations.*, users.*, files.* and auth.test, JSON for views.* and
// apps.connections.open, GET with Bearer for chat.getPermalink):
//
//	auth.test, apps.connections.open,
//	chat.postMessage, chat.update, chat.delete, chat.postEphemeral, chat.getPermalink,
//	conversations.open, users.info, users.lookupByEmail,
//	views.open, views.push, views.update, views.publish,
//	files.getUploadURLExternal, (the upload URL), files.completeUploadExternal
//
// Anything else answers {"ok":false,"error":"unknown_method"} and is recorded.
// chat.postMessage returns strictly increasing, unique timestamps with a
// microsecond part ("1764576000.000123"), so threads never collide. Block Kit
// limits that Slack enforces are enforced: more than 50 blocks in a message,
// section text over 3000 characters, more than 10 section fields or a field over
// 2000 characters, header text over 150, more than 25 elements in an actions
// block, block_id or action_id over 255, an empty text object, a duplicate
// block_id, an unknown block type or an input block in a message →
// invalid_blocks; blocks that are not a JSON array → invalid_blocks_format; text
// over 40000 characters → msg_too_long; neither text nor blocks → no_text.
// (Slack's msg_blocks_too_long, a total-size limit of roughly 13 000
// characters, is not modelled.) Views: more than
// 100 blocks, a title over 24 characters, private_metadata over 3000 characters
// or a wrong view type → invalid_arguments (with response_metadata.messages as
// Slack sends them).
//
// # Inspecting what the bot did
//
// [Server.Messages], [Server.Thread], [Server.DMs], [Server.Ephemerals],
// [Server.ResponseURLPosts], [Server.Views], [Server.HomeView], [Server.Files],
// [Server.Calls], [Server.Acks], [Server.Envelopes] and [Server.Unacked]
// return copies and are safe to call from any goroutine. chat.update and
// replace_original edit a [Message] in place (Edits, History); deleted
// messages stay, with Deleted set. [Server.Connections] counts live sockets,
// [Server.ConnectCount] the sockets accepted so far. [Server.WaitFor] waits for
// a condition over them and wakes on every change. [Server.Unacked] lists the
// envelopes not acked within 3 s ([WithAckDeadline]); a test can assert it is
// empty at the end.
//
// # Fault injection
//
// [Server.Revoke] makes every later Web API call with a token answer
// token_revoked (an uninstalled app), until [Server.Restore].
// [Server.RateLimit] makes the next n calls of a method answer HTTP 429 with a
// Retry-After header in whole seconds (slack-go turns that into
// *slack.RateLimitedError); [Server.FailNext] makes the next call answer
// {"ok":false,"error":code}; [Server.FailNextStatus] answers an HTTP status
// (e.g. 500). The method name "response_url" targets response URL posts
// (FailNext then answers webhook-style, a 4xx with the code).
//
// # Caveats
//
// Time is real (message timestamps and trigger expiry use the wall clock). The
// fake keeps one workspace ([TeamID]) and one app ([AppID]); channels need not
// be created: any ID starting with C or G is a channel, D… channels come from
// conversations.open, and posting to a user ID posts to that user's DM. As on
// Slack, chat.postMessage and chat.postEphemeral also take a channel's name
// ("#gpu-nlp" or "gpu-nlp"): the fake gives each name a stable ID
// ([Server.ChannelID]), answers with it and keeps the messages under it;
// chat.update, chat.delete, chat.getPermalink, conversations.open and
// files.completeUploadExternal want the ID and answer channel_not_found to a
// name. [Server.Messages], [Server.Thread], [Server.SlashCommand] and
// [Server.ClickButton] accept either. Not
// implemented: Events API message events, chat.scheduleMessage, reactions,
// conversations.history, view_closed, block_suggestion, user groups.
package slackfake
