// The browser half of scripts/bench_console.py: logs in, then loads a
// session's page PINCER_LOADS times and reports, per load, the first
// contentful paint and when the whole transcript (PINCER_RUNS runs, each
// ended) was drawn, in milliseconds from the navigation's start.
import { check, launch, open, run, shot, step } from '../tests/fixtures/browser/harness.mjs';

const base = process.env.PINCER_URL;
const session = process.env.PINCER_SESSION;
const runs = Number(process.env.PINCER_RUNS);
const loads = Number(process.env.PINCER_LOADS || 5);

await run(async () => {
  const browser = await launch();
  const page = await open(browser, { baseURL: base });
  step('log in');
  await page.goto('/ui/login');
  await page.fill('#token', process.env.PINCER_TOKEN);
  await Promise.all([page.waitForURL('**/ui/sessions'), page.click('button[type=submit]')]);
  const firstPaint = [];
  const drawn = [];
  const firstRun = [];
  for (let load = 0; load < loads; load += 1) {
    step(`load ${load + 1}`);
    await page.goto(`/ui/sessions/${session}`);
    await page.waitForFunction(() => document.querySelector('.run .message.assistant'), null, { timeout: 120_000, polling: 'raf' });
    firstRun.push(await page.evaluate(() => performance.now()));
    await page.waitForFunction((count) => document.querySelectorAll('.run .state.completed').length >= count, runs, { timeout: 120_000, polling: 'raf' });
    const done = await page.evaluate(() => performance.now());
    const paint = await page.evaluate(() => {
      const entry = performance.getEntriesByName('first-contentful-paint')[0];
      return entry ? entry.startTime : null;
    });
    check(paint !== null, 'no first contentful paint recorded');
    firstPaint.push(paint);
    drawn.push(done);
  }
  await shot(page, 'bench-session');
  return { first_paint_ms: firstPaint, first_run_ms: firstRun, drawn_ms: drawn };
});
