import { afterAll, afterEach, beforeAll, describe, test } from 'bun:test'
import { type FormPageCase, runFormPage } from './form-pages'
import { type BrowserHarness, SETUP_TIMEOUT_MS, startBrowserHarness, TIMEOUT_MS } from './support'

/**
 * tracker.js on copies of the markup real form builders render (test/browser/fixtures/), in auto
 * mode: the lead read back through GET /api/v2/leads, the page's own submit intact, and the request
 * body free of builder plumbing, nonces and URL secrets.
 */
let harness: BrowserHarness

beforeAll(async () => {
  harness = await startBrowserHarness()
}, SETUP_TIMEOUT_MS)
afterEach(() => harness.closeContexts())
afterAll(() => harness?.stop())

const CASES: FormPageCase[] = [
  {
    fixture: 'contact-form-7',
    steps: [
      ['fill', '[name=your-name]', 'Ada King Lovelace'],
      ['fill', '[name=your-email]', '{email}'],
      ['fill', '[name=your-subject]', 'A demo'],
      ['fill', '[name=your-message]', 'Call me'],
      ['click', '.wpcf7-submit'],
    ],
    ownSubmit: '/done/contact-form-7',
    lead: {
      first_name: 'Ada',
      last_name: 'King Lovelace',
      phone_raw: null,
      custom_fields: { 'your-subject': 'A demo', 'your-message': 'Call me' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'your-subject', 'your-message'],
    forbiddenNames: ['_wpcf7', '_wpcf7_version', '_wpcf7_locale', '_wpcf7_unit_tag', '_wpcf7_container_post'],
    forbiddenValues: ['wpcf7-f42-p7-o1'],
  },
  {
    fixture: 'hubspot-v2',
    steps: [
      ['fill', '[name=firstname]', 'Grace'],
      ['fill', '[name=lastname]', 'Hopper'],
      ['fill', '[name=email]', '{email}'],
      ['fill', '[name=phone]', '+1 212 555 0100'],
      ['fill', '[name=company]', 'Navy'],
      ['click', '.hs-button'],
    ],
    ownSubmit: '/done/hubspot-v2',
    lead: {
      first_name: 'Grace',
      last_name: 'Hopper',
      phone_raw: '+1 212 555 0100',
      custom_fields: { company: 'Navy' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw', 'company'],
    forbiddenNames: ['hs_context'],
    forbiddenValues: ['8f7e6d5c4b3a29180706f5e4d3c2b1a0'],
  },
  {
    fixture: 'webflow',
    steps: [
      ['fill', '#name', 'Katherine Johnson'],
      ['fill', '#email', '{email}'],
      ['fill', '#Field-2', '11-50'],
      ['fill', '#field', 'Orbital mechanics'],
      ['click', '.w-button'],
    ],
    ownSubmit: '/done/webflow',
    lead: {
      first_name: 'Katherine',
      last_name: 'Johnson',
      phone_raw: null,
      custom_fields: { team_size: '11-50', message: 'Orbital mechanics' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'team_size', 'message'],
  },
  {
    fixture: 'mailchimp',
    steps: [
      ['fill', '#mce-EMAIL', '{email}'],
      ['fill', '#mce-FNAME', 'Dorothy'],
      ['fill', '#mce-LNAME', 'Vaughan'],
      ['fill', '#mce-PHONE', '+1 757 555 0142'],
      ['click', '#mc-embedded-subscribe'],
    ],
    ownSubmit: '/done/mailchimp',
    lead: { first_name: 'Dorothy', last_name: 'Vaughan', phone_raw: '+1 757 555 0142', custom_fields: {} },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw'],
    forbiddenNames: ['tags'],
  },
  {
    fixture: 'react-named',
    steps: [
      ['fill', '[name=fullName]', 'Mary Jackson'],
      ['fill', '[name=workEmail]', '{email}'],
      ['fill', '[name=phoneNumber]', '+1 757 555 0199'],
      ['select', '[name=teamSize]', '11-50'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/react-named',
    lead: {
      first_name: 'Mary',
      last_name: 'Jackson',
      phone_raw: '+1 757 555 0199',
      custom_fields: { teamSize: '11-50' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw', 'teamSize'],
  },
  {
    fixture: 'request-submit',
    steps: [
      ['fill', '[name=name]', 'Annie Easley'],
      ['fill', '[name=email]', '{email}'],
      ['fill', '[name=product]', 'Centaur'],
      ['click', '#send'],
    ],
    ownSubmit: '/done/request-submit',
    lead: {
      first_name: 'Annie',
      last_name: 'Easley',
      phone_raw: null,
      custom_fields: { product: 'Centaur' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'product'],
  },
  {
    fixture: 'multi-step',
    steps: [
      ['fill', '#w-email', '{email}'],
      ['click', '#next'],
      ['fill', '#w-first', 'Christine'],
      ['fill', '#w-last', 'Darden'],
      ['fill', '#w-company', 'NASA Langley'],
      ['click', '#step-2 button[type=submit]'],
    ],
    ownSubmit: '/done/multi-step',
    // The hidden campaign input is sent; the hidden copy of the e-mail and the step counter are not.
    lead: {
      first_name: 'Christine',
      last_name: 'Darden',
      phone_raw: null,
      custom_fields: { company: 'NASA Langley', utm_campaign: 'spring' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'company', 'utm_campaign'],
    forbiddenNames: ['confirmed_email', 'step'],
  },
  {
    fixture: 'gravity-forms',
    steps: [
      ['fill', '#input_1_1_3', 'Evelyn'],
      ['fill', '#input_1_1_6', 'Boyd Granville'],
      ['fill', '#input_1_2', '{email}'],
      ['fill', '#input_1_3', '+1 213 555 0123'],
      ['fill', '#input_1_4', 'IBM'],
      ['click', '#gform_submit_button_1'],
    ],
    ownSubmit: '/done/gravity-forms',
    lead: {
      first_name: 'Evelyn',
      last_name: 'Boyd Granville',
      phone_raw: '+1 213 555 0123',
      custom_fields: { company: 'IBM' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw', 'company'],
    forbiddenNames: [
      'gform_submission_method',
      'gform_theme',
      'gform_style_settings',
      'is_submit_1',
      'gform_submit',
      'gform_unique_id',
      'state_1',
      'gform_target_page_number_1',
      'gform_source_page_number_1',
      'gform_field_values',
      'input_1.3',
      'input_1.6',
      'input_2',
      'input_4',
    ],
    forbiddenValues: [
      'WyJbXSIsIjZkNjMzNjFlNGQ4YjQ1NzQ5ZmFlYWYxNjk2NjNlMzgxIl0=',
      'postback',
      'gravity-theme',
    ],
  },
  {
    fixture: 'wpforms',
    steps: [
      ['fill', '#wpforms-15-field_0', 'Margaret'],
      ['fill', '#wpforms-15-field_0-last', 'Hamilton'],
      ['fill', '#wpforms-15-field_1', '{email}'],
      ['fill', '#wpforms-15-field_2', 'Apollo guidance'],
      ['click', '#wpforms-submit-15'],
    ],
    ownSubmit: '/done/wpforms',
    lead: {
      first_name: 'Margaret',
      last_name: 'Hamilton',
      phone_raw: null,
      custom_fields: { comment_or_message: 'Apollo guidance' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'comment_or_message'],
    forbiddenNames: [
      'wpforms_id',
      'wpforms_token',
      'wpforms_post_id',
      'page_id',
      'page_title',
      'url_referer',
    ],
    forbiddenValues: ['8a7f6e5d4c3b2a1908f7e6d5c4b3a291', 'WPFORMS-PAGE-URL-SECRET'],
  },
  {
    fixture: 'elementor',
    steps: [
      ['fill', '#form-field-name', 'Hedy Lamarr'],
      ['fill', '#form-field-email', '{email}'],
      ['fill', '#form-field-field_9e8d7c6', '25000'],
      ['fill', '#form-field-message', 'Frequency hopping'],
      ['click', '.elementor-button'],
    ],
    ownSubmit: '/done/elementor',
    lead: {
      first_name: 'Hedy',
      last_name: 'Lamarr',
      phone_raw: null,
      custom_fields: { budget: '25000', message: 'Frequency hopping' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'budget', 'message'],
    forbiddenNames: ['post_id', 'form_id', 'referer_title', 'queried_id', 'form_fields_field_9e8d7c6'],
    forbiddenValues: ['4f5e6d7'],
  },
  {
    fixture: 'woocommerce-checkout',
    steps: [
      ['fill', '#billing_first_name', 'Mae'],
      ['fill', '#billing_last_name', 'Jemison'],
      ['fill', '#billing_company', 'Jemison Group'],
      ['fill', '#billing_phone', '+1 713 555 0187'],
      ['fill', '#billing_email', '{email}'],
      ['click', '#place_order'],
    ],
    ownSubmit: '/done/woocommerce-checkout',
    lead: {
      first_name: 'Mae',
      last_name: 'Jemison',
      phone_raw: '+1 713 555 0187',
      custom_fields: { billing_company: 'Jemison Group', payment_method: 'cod' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw', 'billing_company', 'payment_method'],
    forbiddenNames: ['woocommerce-process-checkout-nonce', '_wp_http_referer'],
    forbiddenValues: ['a1b2c3d4e5', '/?wc-ajax=update_order_review'],
  },
  {
    fixture: 'react-unnamed',
    steps: [
      ['fill', '[id=":r4:"]', 'Sally Ride'],
      ['fill', '[placeholder="Work email"]', '{email}'],
      ['fill', '[aria-label=Phone]', '+1 650 555 0110'],
      ['fill', 'label:has-text("Company") input', 'Stanford'],
      ['fill', '[autocomplete=address-level2]', 'La Jolla'],
      ['fill', 'form > div:nth-of-type(6) input', 'unreadable value'],
      ['click', 'button[type=submit]'],
    ],
    ownSubmit: '/done/react-unnamed',
    // Named from the label, placeholder, aria-label and autocomplete; the input nothing names is left out.
    lead: {
      first_name: 'Sally',
      last_name: 'Ride',
      phone_raw: '+1 650 555 0110',
      custom_fields: { company: 'Stanford', 'address-level2': 'La Jolla' },
    },
    sentKeys: ['first_name', 'last_name', 'email', 'phone_raw', 'company', 'address-level2'],
    forbiddenValues: ['unreadable value'],
  },
]

describe('tracker.js on form builders (auto mode)', () => {
  for (const testCase of CASES) {
    test(
      `${testCase.fixture}: lead mapped with both touches, page submit intact, no plumbing or URL secrets sent`,
      async () => {
        await runFormPage(harness, testCase)
      },
      TIMEOUT_MS,
    )
  }
})
