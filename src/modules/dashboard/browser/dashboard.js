// The dashboard's only script of its own: the 24-hour chart (uPlot) and the copy buttons.
// Served as a file so the Content-Security-Policy can forbid inline scripts.
;(() => {
  const COLORS = {
    created: '#1b7f3b',
    updated: '#2f6fb3',
    spam: '#b07d00',
    error: '#b3261e',
    rejected: '#6b4fa0',
  }

  function drawCharts(root) {
    for (const element of root.querySelectorAll('[data-chart]')) {
      if (element.dataset.drawn || typeof uPlot === 'undefined') continue
      const source = document.getElementById(element.dataset.chart)
      if (!source) continue
      element.dataset.drawn = 'true'
      const data = JSON.parse(source.textContent)
      const outcomes = Object.keys(data.series)
      // Stacked bars: each series is drawn as the running total up to it, the legend shows its own value.
      const totals = data.hours.map(() => 0)
      const stacked = outcomes.map((outcome) =>
        data.series[outcome].map((value, index) => {
          totals[index] += value
          return totals[index]
        }),
      )
      const bars = uPlot.paths.bars({ size: [0.8, 40] })
      const width = Math.max(280, Math.min(element.clientWidth || 640, 900))
      // uPlot paints series in array order: the largest running total goes first so the
      // smaller ones are painted over it and every band stays visible.
      const order = outcomes.map((_, index) => outcomes.length - 1 - index)
      const options = {
        width,
        height: 240,
        scales: { x: { time: true } },
        axes: [{}, { label: 'requests' }],
        series: [
          { label: 'hour (UTC)' },
          ...order.map((position) => ({
            label: outcomes[position],
            fill: COLORS[outcomes[position]],
            stroke: COLORS[outcomes[position]],
            paths: bars,
            points: { show: false },
            // The legend shows the outcome's own count, not the running total.
            value: (_chart, _value, _series, index) =>
              index == null ? '-' : data.series[outcomes[position]][index],
          })),
        ],
        tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), 'Etc/UTC'),
      }
      new uPlot(options, [data.hours, ...order.map((position) => stacked[position])], element)
    }
  }

  document.addEventListener('click', async (event) => {
    const button = event.target.closest('[data-copy]')
    if (!button) return
    const input = document.getElementById(button.dataset.copy)
    const status = button.parentElement?.parentElement?.querySelector('.copy-status')
    try {
      await navigator.clipboard.writeText(input.value)
      if (status) status.textContent = 'Copied.'
    } catch {
      input.select()
      if (status) status.textContent = 'Press Ctrl+C (or Cmd+C) to copy.'
    }
  })

  document.addEventListener('DOMContentLoaded', () => drawCharts(document))
  document.addEventListener('htmx:load', (event) => drawCharts(event.target))
})()
