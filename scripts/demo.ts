/** `npm run demo`: what each algorithm admits in the two seed scenarios, on injected time. */
import { boundaryBurst, boundaryContenders, burstThenSteady, steadyContenders } from "./scenarios.ts";

const pad = (text: string | number, width: number): string => String(text).padEnd(width);

console.log("Scenario 1 — boundary burst: 100 requests in the last second of a window, 100 in the first second of the next\n");
console.log(`${pad("algorithm", 38)}${pad("last second", 13)}${pad("first second", 14)}admitted in 2 s`);
for (const { label, policy } of boundaryContenders) {
  const r = await boundaryBurst(policy);
  console.log(`${pad(label, 38)}${pad(r.lastSecond, 13)}${pad(r.firstSecond, 14)}${r.total}`);
}

console.log("\nScenario 2 — burst then steady: 150 requests at once, then 50 attempts per second\n");
console.log(`${pad("algorithm", 38)}${pad("burst", 8)}admitted in each following second`);
for (const { label, policy } of steadyContenders) {
  const r = await burstThenSteady(policy);
  console.log(`${pad(label, 38)}${pad(r.burst, 8)}${r.perSecond.join(" ")}`);
}
