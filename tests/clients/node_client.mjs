// Segment's Node library (@segment/analytics-node) pointed at an eventlake collector.
//
//   node node_client.mjs '{"host": "http://127.0.0.1:8088", "writeKey": "wk_web", "run": "abc"}'
//
// Makes one call of every type, flushes, and prints one JSON document on stdout: every request body
// the library sent (from its own `http_request` event), every response status, every error.
import { Analytics } from '@segment/analytics-node'

const { host, writeKey, run } = JSON.parse(process.argv[2])
const analytics = new Analytics({ writeKey, host, flushAt: 4, flushInterval: 200, maxRetries: 2 })
const requests = []
const statuses = []
const errors = []
analytics.on('http_request', (request) => requests.push(JSON.parse(request.body)))
analytics.on('http_response', (response) => statuses.push(response.status))
analytics.on('error', (error) => errors.push(String(error?.reason ?? error?.code ?? error)))

const user = `node-user-${run}`
const context = { app: { name: 'node-test', version: '1.2.3' }, locale: 'de-DE' }
analytics.identify({ userId: user, traits: { email: 'ann@example.com', plan: 'pro', logins: 7 }, context })
analytics.track({
  userId: user,
  event: 'Order Completed',
  properties: { revenue: 19.99, items: 2, coupon: null, tags: ['a', 'b'] },
  timestamp: new Date('2026-03-04T05:06:07.089Z'),
  integrations: { All: true, Mixpanel: false },
})
analytics.page({ anonymousId: `node-anon-${run}`, category: 'Docs', name: 'Home', properties: { path: '/' } })
analytics.screen({ userId: user, name: 'Settings', properties: { tab: 'privacy' } })
analytics.group({ userId: user, groupId: `node-group-${run}`, traits: { employees: 12 } })
analytics.alias({ userId: user, previousId: `node-anon-${run}` })
await analytics.closeAndFlush({ timeout: 20000 })
process.stdout.write(JSON.stringify({ requests, statuses, errors }) + '\n')
