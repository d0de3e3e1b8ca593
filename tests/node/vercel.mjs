// The Vercel AI SDK's default OpenAI model path (the Responses API) through toolshim:
// generateText and streamText with one tool and a step limit, to a final answer.
// Usage: TOOLSHIM_BASE_URL=http://127.0.0.1:8000/v1 node vercel.mjs generate|stream
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const openai = createOpenAI({ baseURL: process.env.TOOLSHIM_BASE_URL, apiKey: "unused" });
const calls = [];
const tools = {
  get_weather: tool({
    description: "Weather for a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return { city, temperature_c: 21 };
    },
  }),
};
const params = { model: openai("m"), prompt: "What is the weather in Paris?", tools, stopWhen: stepCountIs(3) };

let text;
let steps;
if (process.argv[2] === "stream") {
  const result = streamText(params);
  const pieces = [];
  for await (const piece of result.textStream) pieces.push(piece);
  text = await result.text;
  steps = (await result.steps).length;
  if (pieces.join("") !== text) throw new Error("streamed text differs from the final text");
} else {
  const result = await generateText(params);
  text = result.text;
  steps = result.steps.length;
}
console.log(JSON.stringify({ text, steps, calls }));
