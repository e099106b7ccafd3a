// Load a page in Debian's headless Chromium (driven by playwright-core, no downloaded browser)
// and report every request it made.
//
//   node browser_client.mjs '{"url": "...", "chromium": "/usr/bin/chromium", "userDataDir": "/tmp/x",
//                            "collector": "http://127.0.0.1:8088", "timeoutMs": 30000}'
//
// Waits for the page to set window.eventlakeResult, then until every message it reports has been
// posted to the collector, and prints one JSON document: the page's result, every request
// (URL, method, body, response status or failure), and the page's console errors.
import { chromium } from 'playwright-core'

const config = JSON.parse(process.argv[2])
const deadline = Date.now() + config.timeoutMs
const context = await chromium.launchPersistentContext(config.userDataDir, {
  executablePath: config.chromium,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
})
const requests = []
const consoleErrors = []
try {
  context.on('request', (request) => {
    requests.push({ url: request.url(), method: request.method(), body: request.postData(), status: null })
  })
  const settle = (request, fields) => {
    const entry = requests.find((r) => r.url === request.url() && r.body === request.postData() && r.status === null)
    if (entry) Object.assign(entry, fields)
  }
  context.on('requestfinished', async (request) => {
    const response = await request.response()
    settle(request, { status: response ? response.status() : 0 })
  })
  context.on('requestfailed', (request) => settle(request, { status: -1, failure: request.failure()?.errorText }))
  const page = context.pages()[0] ?? (await context.newPage())
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text())
  })
  page.on('pageerror', (error) => consoleErrors.push(String(error)))
  await page.goto(config.url, { timeout: Math.max(1000, deadline - Date.now()) })
  await page.waitForFunction(() => window.eventlakeResult, null, { timeout: Math.max(1000, deadline - Date.now()) })
  const result = await page.evaluate(() => window.eventlakeResult)
  const wanted = new Set((result.results ?? []).map((r) => r.messageId))
  const delivered = () => {
    const seen = new Set()
    for (const r of requests) {
      if (!r.url.startsWith(config.collector) || r.status !== 200 || !r.body) continue
      const body = JSON.parse(r.body)
      for (const message of body.batch ?? [body]) seen.add(message.messageId)
    }
    return [...wanted].every((id) => seen.has(id))
  }
  while (!delivered() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  process.stdout.write(JSON.stringify({ result, requests, consoleErrors }) + '\n')
} finally {
  await context.close()
}
