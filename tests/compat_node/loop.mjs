// A real tool loop through toolshim with Node clients: `node loop.mjs <client> <base_url>`.
// Prints one JSON line: {"answer": ..., "calls": [...]}; the Python test checks it.
import OpenAI from "openai";
import { generateText, streamText, tool, isStepCount, jsonSchema } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const [client, baseURL] = process.argv.slice(2);
const question = "What is the weather in Paris?";
const calls = [];
function getWeather({ city }) {
  calls.push(city);
  return { city, temperature_c: 21, conditions: "sunny" };
}
const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };

async function openaiRunTools() {
  const openai = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const runner = openai.chat.completions.runTools({
    model: "qwen",
    messages: [{ role: "user", content: question }],
    tools: [{ type: "function", function: { name: "get_weather", description: "Current weather for a city.",
                                             parameters, function: getWeather, parse: JSON.parse } }],
  });
  return await runner.finalContent();
}

function aiSdk() {
  const provider = createOpenAICompatible({ name: "toolshim", baseURL, apiKey: "unused" });
  return {
    model: provider.chatModel("qwen"),
    prompt: question,
    tools: { get_weather: tool({ description: "Current weather for a city.", inputSchema: jsonSchema(parameters),
                                 execute: async (input) => getWeather(input) }) },
    stopWhen: isStepCount(5),
    maxRetries: 0,
  };
}

async function vercelGenerate() {
  return (await generateText(aiSdk())).text;
}

async function vercelStream() {
  const result = streamText(aiSdk());
  let text = "";
  for await (const part of result.textStream) text += part;
  return text;
}

const run = { "openai-runTools": openaiRunTools, "ai-generateText": vercelGenerate, "ai-streamText": vercelStream }[client];
const answer = await run();
console.log(JSON.stringify({ answer, calls }));
