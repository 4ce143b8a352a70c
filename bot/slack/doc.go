// Package slackbot connects gpubot to Slack over Socket Mode. It is the
// only importer of slack-go (with its subpackages blockkit, which renders
// Block Kit, and slackfake, a fake Slack for tests).
//
// # Basics
//
// An Adapter reads Socket Mode envelopes itself (socket.go says why not
// with slack-go's socketmode client) and acks each one at once, exactly
// once (Slack wants that within 3 s); the work then goes to the bot runtime (bot.Runtime.Submit), whose bounded worker pool
// runs commands.Service with panic recovery and deduplication. The Adapter
// is also the runtime's bot.Sender: every reply becomes one or more Web
// API calls in the outbound Queue.
//
//	/gpu …                  → commands.Input{Text}; a bare "/gpu request" opens the request modal (views.open)
//	button (block_actions)  → commands.Input{Action} via blockkit.ParseAction; a gpubot
//	                          button gpubot did not make → Input{Unreadable} (answered, audited)
//	modal (view_submission) → validated in the ack (response_action "errors"), then Input{Text}
//	app_home_opened         → views.publish of Service.Home; then, for a day, again every
//	                          minute in which anything was sent (WithHomeRefresh)
//
//	ToSender   → the sender only: response_url (ephemeral), else chat.postEphemeral, else a DM
//	ToChannel  → chat.postMessage: the request's card; its (channel, ts) is saved in the store
//	ToThread   → chat.postMessage with thread_ts = the card's ts
//	UpdateCard → chat.update of the card
//	ToPerson   → conversations.open + chat.postMessage (a DM)
//
// A reply too long for Block Kit is cut by blockkit, and the whole text is
// uploaded as a file next to it (files.getUploadURLExternal → upload →
// files.completeUploadExternal).
//
// # People
//
// People are known by the Slack user IDs in gpubot's configuration
// (people[].slackID); the service tells anyone else how to get added.
// Optionally (MatchByEmail, config slack.matchByEmail) a person with an
// email but no slackID is found through the Slack profile's e-mail
// address (users.info, users.lookupByEmail; scopes users:read and
// users:read.email), as a middleware around the command handler.
//
// # Deduplication
//
// Slack may deliver an envelope more than once (retries, several
// connections). Commands, modal submissions and App Home events are keyed
// by their envelope (or event) ID, button presses by (user, action,
// message ts, action_ts), and the runtime's Deduper (bbolt, with a TTL)
// drops repeats. A double click is two presses; the service answers the
// second without applying it again.
//
// # Rate limits
//
// All Web API calls go through one Queue: in order within a channel (and
// within one person's private replies), channels independently, about one
// message per second per channel after a small burst, and an HTTP 429
// holds the method back for its Retry-After before the call is retried.
// Nothing is dropped for a rate limit; network failures and 5xx answers
// are retried with backoff for up to 15 minutes.
//
// # Connection
//
// The adapter opens Socket Mode connections itself: apps.connections.open
// (slack-go, app-level token), then the WebSocket (gorilla), reading each
// frame field by field. It reconnects after a network loss or a ping
// timeout (no ping or frame for WithPingTimeout, 30 s by default), with
// backoff from 1 s to 1 min; these waits are real time, the network's.
// On a "disconnect" (refresh_requested, warning) it opens a new socket at
// once and reads the old one until Slack closes it (at most a minute), so
// an envelope sent on it meanwhile is acked and handled; an ack goes on
// the socket its envelope came on, or the newest if that one is gone. An
// envelope whose ack was lost is redelivered by Slack and dropped as a
// duplicate if it was already taken. Ready reports whether a connection
// is up and Slack takes the bot token (gpubot's /readyz).
//
// # Envelopes that do not decode
//
// An envelope with an envelope_id is acked whatever it holds: a payload
// that is not an object or has a field of the wrong type (text an array,
// callback_id a number), no type or an unknown one. It gets one log line
// with its type, envelope ID, why, and a redacted summary (the payload's
// keys and the kinds of their values, never a value: payloads carry a
// verification token and what people typed). If the payload names the
// person who typed, pressed or submitted it, the runtime hands the
// service a commands.Input with Unreadable set: it is audited as invalid
// and answered in private ("Sorry, gpubot couldn't understand that
// command (its text is an array, not a string)"). Broken Events API
// events are acked and logged only. A press of a button with gpubot's
// prefix that gpubot did not make (bad value or number, unknown verb) is
// answered and audited the same way; another app's button is ignored.
//
// # Refused tokens
//
// At start, a bot token that auth.test refuses or an app token that
// apps.connections.open refuses stops Run (ErrBotToken, ErrAppToken). While
// running, a Web API call answered token_revoked, invalid_auth (and the
// like) holds the outbound queue's calls, makes Ready fail, and starts a
// recheck with auth.test: three tries 10 s apart on the adapter's clock
// (WithTokenRecheck). If Slack still refuses, Run returns ErrBotToken and
// gpubot exits 1; if it takes the token again, the held calls go out. A
// refused app token on reconnecting is rechecked the same way.

// # Ordering
//
// One person's commands and clicks are handled one at a time, in the
// order Slack delivered them (bot.Event.Order is the user ID), so their
// answers come in the order typed. A thread update that overtakes its
// card (two workers) waits for the card.
//
// # Caveats
//
// Tokens are never logged nor shown: errors that could carry one are
// scrubbed. Request cards of a request whose card was never posted (work
// seeded into the simulated cluster) have no thread, so their thread
// updates are skipped. The bot must be a member of the channels it posts
// cards in (invite it), since the app asks only for chat:write.
package slackbot
